"""Issue 31: clear errors before any work for the exact flow's certificate, window tables that would not
fit in memory, and the output Jacobians of spectra."""

import numpy as np
import pytest

import sheaflinalg as sl

NET = sl.Network.random([2, 4, 1], seed=0)


@pytest.fixture(scope="module")
def exact():
    return sl.heat(NET, [[0.5, -1.0], [1.0, 1.0]], method="exact", seed=1)


@pytest.mark.parametrize("t,error,match", [
    ([1.0, 2.0, 3.0], ValueError, r"one time or one per sample \(shape \(2,\)\), got shape \(3,\)"),
    ([[1.0, 2.0]], ValueError, r"got shape \(1, 2\)"),
    (float("nan"), ValueError, "certificate: t contains NaN"),
    ("1.0", TypeError, "certificate: t must be numeric"),
    (-1.0, ValueError, "from each sample's last event on; sample 0"),
])
def test_certificate_refuses_times_it_cannot_bound(exact, t, error, match):
    with pytest.raises(error, match=match):
        exact.certificate(t)


def test_certificate_keeps_one_time_and_one_per_sample(exact):
    one = exact.certificate(float(exact.time.max()))
    each = exact.certificate(np.full(2, exact.time.max()))
    assert one.shape == (2,) and np.array_equal(one, each)
