"""The compiled ``exp`` and ``tanh`` (``sheaflinalg/kernels/elementary.py``) against mpmath at 40 digits:
relative errors in units of float64's rounding at random points of the whole range, the ends of the
reduction, the subnormal results and the special values."""

import math

import mpmath as mp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sheaflinalg.kernels import elementary

EPS = np.finfo(float).eps
mp.mp.dps = 40


@njit(cache=False)
def _exp_rows(x, out):                  # in a loop, as the kernels call it (inlined, vectorised)
    for i in range(x.size):
        out[i] = elementary.exp(x[i])


@njit(cache=False)
def _tanh_rows(x, out):
    for i in range(x.size):
        out[i] = elementary.tanh(x[i])


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


def _tanhs(x):
    out = np.empty_like(x)
    _tanh_rows(x, out)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-25.0, 25.0, allow_subnormal=False) | st.floats(-1e-3, 1e-3, allow_subnormal=False)
                | st.sampled_from([1e-300, -1e-300, 0.17, -0.17, 0.35, 0.6, -0.6]), min_size=1, max_size=40))
def test_tanh_is_within_a_few_roundings_near_zero_and_everywhere(xs):
    x = np.array(xs)
    for got, t in zip(_tanhs(x), x):
        if t != 0.0:
            assert _relative(got, mp.tanh(mp.mpf(float(t)))) <= 3 * EPS, t


def test_tanh_at_its_ends_and_the_special_values():
    x = np.array([0.0, -0.0, 20.0, -20.0, 40.0, 1e300, np.inf, -np.inf, np.nan])
    got = _tanhs(x)
    assert got[0] == 0.0 and math.copysign(1.0, got[1]) == -1.0          # the sign of zero kept
    assert np.all(got[[2, 4, 5, 6]] == 1.0) and np.all(got[[3, 7]] == -1.0) and np.isnan(got[8])
    wide = np.linspace(-30.0, 30.0, 2001)
    assert np.max(np.abs(_tanhs(wide) - np.tanh(wide))) <= 2 * EPS      # and libm's to a rounding or two
