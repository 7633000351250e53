"""The fused kernels of the forward pass (``checked_affine``, ``checked_add``) against the definitions: their values,
masks and rectified values on every sign pattern, and their finiteness flag on every entry they read or write
(issue 33: the flag is an "or" of per-entry tests, no longer a float sum)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sheaflinalg.kernels.elementwise import all_finite, checked_add, checked_affine

PATTERNS = ("mixed", "all active", "all dead", "exact zeros")


def _entries(rng, shape, pattern):
    """Entries of ``shape`` that make the pre-activations of one sign pattern (with ``scale`` 1 and ``shift`` 0)."""
    z = rng.normal(size=shape)
    if pattern == "all active":
        return np.abs(z)
    if pattern == "all dead":
        return -np.abs(z) - 0.1
    if pattern == "exact zeros":
        z[rng.random(shape) < 0.5] = 0.0
    return z


def _rectified(z, slope):
    mask = z >= 0
    return mask, np.where(mask, z, slope * z)


def _run(kernel, inputs, n_out, slope, then):
    out, rect, mask = np.empty(n_out), np.empty(n_out), np.empty(n_out, dtype=bool)
    if not then:
        rect, mask = np.empty((0, 0)), np.empty((0, 0), dtype=bool)
    finite = kernel(*inputs, out, slope, mask, rect, then)
    return finite, out, mask, rect


@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6), st.sampled_from(PATTERNS),
       st.sampled_from([0.0, 0.1]), st.booleans(), st.integers(0, 2 ** 16))
def test_the_checked_kernels_are_their_definitions(samples, channels, positions, pattern, slope, then, seed):
    rng = np.random.default_rng(seed)
    shape = (samples, channels * positions)
    x = _entries(rng, shape, pattern)
    scale, shift = np.ones(channels), np.zeros(channels)
    if pattern == "mixed":
        scale, shift = rng.normal(size=channels), rng.normal(size=channels)
    y = _entries(rng, shape, pattern) if pattern != "exact zeros" else np.zeros(shape)
    affine = (x.reshape(samples, channels, positions) * scale[:, None] + shift[:, None]).reshape(shape)
    for kernel, inputs, value in ((checked_affine, (x, scale, shift), affine), (checked_add, (x, y), x + y)):
        finite, out, mask, rect = _run(kernel, inputs, shape, slope, then)
        assert finite
        np.testing.assert_allclose(out, value, rtol=1e-15, atol=0)
        if then:
            want_mask, want_rect = _rectified(out, slope)
            assert np.array_equal(mask, want_mask)
            assert np.array_equal(rect, want_rect)


def _planted(kernel, where, s, j, rng):
    """Inputs and slope of ``kernel`` with one entry ``(s, j)`` made not finite (or overflowing) as ``where`` says."""
    shape, channels = (3, 2 * 5), 2
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    scale, shift, slope = np.ones(channels), np.zeros(channels), 0.5
    if where == "input nan":
        x[s, j] = np.nan
    elif where == "input inf":
        x[s, j] = -np.inf
    elif where == "value overflows":
        x[s, j] = y[s, j] = 1.5e308
        scale[:] = 2.0
    elif where == "rectifier overflows":     # a finite value, -10 or -20, times the slope 1e308
        x[s, j] = y[s, j] = -10.0
        slope = 1e308
    return ((x, scale, shift) if kernel is checked_affine else (x, y)), shape, slope


@pytest.mark.parametrize("then", [False, True])
@pytest.mark.parametrize("where", ["nothing", "input nan", "input inf", "value overflows", "rectifier overflows"])
@pytest.mark.parametrize("kernel", [checked_affine, checked_add])
def test_the_checked_kernels_flag_every_entry_that_is_not_finite(kernel, where, then):
    rng = np.random.default_rng(0)
    for s, j in [(0, 0), (1, 7), (2, 9)]:          # first, middle and last entry of a sample
        inputs, shape, slope = _planted(kernel, where, s, j, rng)
        finite = _run(kernel, inputs, shape, slope, then)[0]
        # without its rectifier, the rectifier's overflow is no concern of the node
        assert finite == (where == "nothing" or (where == "rectifier overflows" and not then)), (s, j)


@given(rows=st.integers(1, 5), cols=st.integers(1, 40), seed=st.integers(0, 2**16),
       planted=st.sampled_from([None, np.nan, np.inf, -np.inf, 1e308]), strided=st.booleans())
def test_all_finite_is_numpys_test_on_every_entry(rows, cols, seed, planted, strided):
    # 1e308 entries are finite, and their sum overflows: the flag must not be a float sum
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 2 * cols))
    if planted is not None:
        x[rng.integers(rows), rng.integers(2 * cols)] = planted
        if planted == 1e308:
            x[:, :] = 1e308
    view = x[:, ::2] if strided else x
    assert all_finite(view) == bool(np.all(np.isfinite(view)))
