"""The compiled ``exp`` and the standard normal's lower tail (``sheaflinalg/kernels/normal.py``) against
mpmath at 40 digits: relative errors in units of float64's rounding, at random points of the whole range,
the ends, the tails and the special values; and its coefficient table regenerated from its script."""

import math
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
def _exp_rows(x, out):                  # in a loop, as the kernels call it (inlined, vectorised)
    for i in range(x.size):
        out[i] = normal.exp(x[i])


@njit(cache=False)
def _tail_rows(y, tail, density):
    for i in range(y.size):
        tail[i], density[i] = normal.normal_lower_tail(y[i])


def _relative(got, exact):
    exact = mp.mpf(exact)
    return float(abs(mp.mpf(float(got)) - exact) / abs(exact))


def _exps(x):
    out = np.empty_like(x)
    _exp_rows(x, out)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-708.0, 709.7), min_size=1, max_size=40))
def test_exp_is_within_one_rounding_where_the_result_is_a_normal_double(xs):
    x = np.array(xs)
    for got, t in zip(_exps(x), x):
        assert _relative(got, mp.exp(mp.mpf(float(t)))) <= EPS, t


def test_exp_at_the_ends_the_special_values_and_the_reduction_boundaries():
    k = np.arange(-1000, 1000, 7.0)
    x = np.concatenate([k * math.log(2.0) + d for d in (-0.3465, 0.0, 0.3466)])     # r at both ends of its range
    x = x[(x > -708.0) & (x < 709.7)]
    assert max(_relative(g, mp.exp(mp.mpf(float(t)))) for g, t in zip(_exps(x), x)) <= EPS
    special = np.array([0.0, -0.0, 709.78, 709.79, 710.0, 1e300, np.inf, -745.1, -745.2, -746.0, -np.inf, np.nan])
    got = _exps(special)
    assert got[0] == got[1] == 1.0
    assert np.isfinite(got[2]) and np.all(np.isinf(got[3:7]))        # log of the largest double: 709.7827
    assert got[7] == 5e-324 and np.all(got[8:11] == 0.0) and np.isnan(got[11])
    sub = np.linspace(-744.0, -709.0, 200)     # subnormal results: one rounding of the subnormal grid
    exact = [mp.exp(mp.mpf(float(t))) for t in sub]
    assert all(abs(mp.mpf(float(g)) - e) <= mp.mpf(5e-324) / 2 + EPS * e for g, e in zip(_exps(sub), exact))
    assert np.max(np.abs(_exps(sub) - np.exp(sub)) / np.exp(sub)) < 1e-3   # and numpy's (libm) to that grid


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
