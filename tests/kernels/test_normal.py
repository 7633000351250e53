"""The standard normal's compiled lower tail (``sheaflinalg/kernels/normal.py``) against mpmath at 40 digits:
relative errors in units of float64's rounding at random points, the far tail and the special values; and
its coefficient table regenerated from its script."""

import runpy

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from helpers.paths import PACKAGE
from sheaflinalg.kernels import normal

EPS = np.finfo(float).eps
mp.mp.dps = 40


@njit(cache=False)
def _tail_rows(y, tail, density):
    for i in range(y.size):
        tail[i], density[i] = normal.normal_lower_tail(y[i])


def _relative(got, exact):
    exact = mp.mpf(exact)
    return float(abs(mp.mpf(float(got)) - exact) / abs(exact))


def _tails(y):
    tail, density = np.empty_like(y), np.empty_like(y)
    _tail_rows(y, tail, density)
    return tail, density


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 37.5) | st.sampled_from([0.0, 1e-300, 1e-8, 0.5, 1.0, 4.0, 8.0, 37.5]),
                min_size=1, max_size=30))
def test_the_lower_tail_and_the_density_keep_their_relative_accuracy(ys):
    y = np.array(ys)
    tail, density = _tails(y)
    for t, d, v in zip(tail, density, y):
        v = mp.mpf(float(v))
        assert _relative(t, mp.ncdf(-v)) <= 4 * EPS, v          # no y^2 roundings lost in the far tail
        assert _relative(d, mp.exp(-v * v / 2)) <= 2 * EPS, v


def test_the_tail_beyond_float64s_range_and_at_the_special_values():
    tail, density = _tails(np.array([38.0, 38.6, 40.0, 1e10, np.inf, np.nan]))
    assert 0.0 < tail[0] < 1e-300 and 0.0 < density[0] < 1e-300          # subnormal, still nonzero
    assert np.all(tail[2:] == 0.0) and np.all(density[2:] == 0.0)
    assert tail[1] <= tail[0] and density[1] <= density[0]


def test_the_coefficient_table_is_what_its_script_derives():
    script = runpy.run_path(str(PACKAGE.parent / "scripts" / "normal_tail_coefficients.py"))
    assert script["SCALE"] == normal.TAIL_SCALE
    np.testing.assert_array_equal(script["coefficients"](), normal.TAIL_COEFFICIENTS)


@pytest.mark.parametrize("y", [0.0, 0.7, 3.0, 12.0, 30.0])
def test_the_interpolant_alone_is_far_below_a_rounding(y):
    # the polynomial's own error, exact arithmetic on the float64 table: under a third of a rounding
    L, c = mp.mpf(normal.TAIL_SCALE), [mp.mpf(float(a)) for a in normal.TAIL_COEFFICIENTS]
    v = mp.mpf(y)
    z, p = (L - v) / (L + v), mp.mpf(0)
    for a in reversed(c):
        p = p * z + a
    assert float(abs(p / (L + v) / (mp.ncdf(-v) * mp.exp(v * v / 2)) - 1)) < EPS / 3
