"""The smooth nodes' compiled kernels (GELU, normalisations, softmax) against their numpy expressions and against
the Jacobian of their definitions, taken by the complex step (``Im f(x + i h e_j) / h``: exact to rounding,
no cancellation), on random shapes with exact zeros, constant groups, ties and masks (float64)."""

import mpmath
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erfc, ndtr

from sheaflinalg.kernels.elementwise import GELU_C, GELU_K, gelu_both
from sheaflinalg.kernels.normalisation import groups_tangent, normalise_groups
from sheaflinalg.kernels.softmax import softmax_slices, softmax_tangent

ROUNDING = dict(rtol=1e-13, atol=1e-14)
_ENTRIES = st.floats(-40.0, 40.0) | st.sampled_from([0.0, -0.0, 1e-300, -0.7, 0.7, -8.0, 8.0, 39.0, -39.0])


def complex_step_jacobian(f, x, h=1e-30):
    """``df/dx`` of a function of one vector that numpy evaluates on complex arguments (analytic ops only)."""
    columns = []
    for j in range(x.size):
        step = x.astype(complex)
        step[j] += 1j * h
        columns.append(np.imag(f(step)) / h)
    return np.array(columns).T


def _gelu_exact(z):
    return z * 0.5 * erfc(-z / np.sqrt(2.0))        # no cancellation in the lower tail


def _gelu_tanh(z):
    return 0.5 * z * (1.0 + np.tanh(GELU_K * (z + GELU_C * z ** 3)))


@given(st.lists(_ENTRIES, min_size=6, max_size=6), st.booleans(), st.booleans())
def test_gelu_both_is_the_numpy_expressions_to_rounding_and_the_definitions_derivative(entries, tanh_form, strided):
    z = np.array(entries).reshape(2, 3)
    z = np.asfortranarray(z) if strided else z
    value, slope = np.empty(z.shape), np.empty(z.shape)
    gelu_both(z, value, slope, tanh_form)
    if tanh_form:       # 1 + t and 1 - t^2 cancel as |z| grows: the scale is that of one rounding of t
        t = np.tanh(GELU_K * (z + GELU_C * z ** 3))
        want = 0.5 * z * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * z * z)
        scale = np.abs(z), 1.0 + np.abs(z) * GELU_K * (1.0 + 3.0 * GELU_C * z * z)
    else:   # Phi(z) + z phi(z) cancels near z = -0.75: the scale is that of its terms; in the tails the rounding
        # of z / sqrt(2) moves erfc by about z^2 of its units (both libraries: about 1e-14 relative at z = -16)
        phi = np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
        want = z * ndtr(z), ndtr(z) + z * phi
        scale = np.abs(want[0]) * (1.0 + z * z), (ndtr(z) + np.abs(z) * phi) * (1.0 + z * z)
    for got, expected, size in zip((value, slope), want, scale):      # the kernel's Phi and libm's tanh against cephes'
        assert np.all(np.abs(got - expected) <= 4e-16 * size + 1e-300)
    definition = _gelu_tanh if tanh_form else _gelu_exact       # the derivative by the complex step, entry by entry
    core = np.abs(z) < 6.0         # scipy's complex erfc is accurate there (the tails are checked above)
    derivative = np.imag(definition(z + 1e-30j)) / 1e-30
    assert np.all(np.abs(slope - derivative)[core] <= 1e-14 * scale[1][core])


def test_gelu_keeps_its_relative_accuracy_in_the_lower_tail_and_at_zero():
    # mpmath at 40 digits is the oracle: scipy's and libm's erfc lose about z^2 roundings in the tails (the
    # rounding of z / sqrt(2) enters exp(-z^2 / 2)); the kernel keeps a few roundings at every z
    z = np.array([[-38.0, -30.0, -20.0, -8.0, -1.0 - 1e-12, -1.0, -1e-8, 0.0, 1e-8, 1.0, 20.0]])
    value, slope = np.empty(z.shape), np.empty(z.shape)
    gelu_both(z, value, slope, False)
    with mpmath.workdps(40):
        want = [float(mpmath.mpf(x) * mpmath.ncdf(x)) for x in z[0]]
        want_slope = [float(mpmath.ncdf(x) + mpmath.mpf(x) * mpmath.npdf(x)) for x in z[0]]
    np.testing.assert_allclose(value[0], want, rtol=4 * np.finfo(float).eps, atol=1e-320)   # (-38: subnormal)
    np.testing.assert_allclose(slope[0], want_slope, rtol=8 * np.finfo(float).eps, atol=1e-320)
    assert value[0, 0] < 0.0 and value[0, 0] > -1e-300          # the far tail keeps its relative accuracy


@st.composite
def _groups(draw):
    M, G, n = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    kind = draw(st.sampled_from(["random", "constant", "zeros", "ties"]))
    x = np.random.default_rng(draw(st.integers(0, 2 ** 16))).normal(size=(M, G * n)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    if kind == "constant":
        x[:, :n] = x[:, :1]                      # the first group constant: sigma = sqrt(eps)
    elif kind == "zeros":
        x[:, ::2] = 0.0
    elif kind == "ties":
        x = np.round(x)
    return x, n, draw(st.booleans()), draw(st.sampled_from([1e-5, 1e-12, 0.5]))


def _normalised(x, n, centred, eps):
    """The definition: ``(x - m) / sqrt(mean((x - m)^2) + eps)`` by group (complex arguments too)."""
    g = x.reshape(x.shape[0], -1, n)
    d = g - g.mean(axis=2, keepdims=True) if centred else g
    return (d / np.sqrt(np.mean(d * d, axis=2, keepdims=True) + eps)).reshape(x.shape)


@settings(max_examples=60, deadline=None)
@given(_groups(), st.booleans())
def test_normalise_groups_and_its_tangent_equal_the_definition_and_its_jacobian(case, strided):
    x, n, centred, eps = case
    M, size = x.shape
    y, sigma, out = np.empty(x.shape), np.empty((M, size // n)), np.empty((M, 2 * size))[:, ::2]
    normalise_groups(np.asfortranarray(x) if strided else x, n, centred, eps, y, sigma, out)
    np.testing.assert_allclose(y, _normalised(x, n, centred, eps), **ROUNDING)
    np.testing.assert_array_equal(out, y)
    v = np.random.default_rng(1).normal(size=x.shape)
    Jv = np.empty(x.shape)
    groups_tangent(y, sigma, np.asfortranarray(v) if strided else v, centred, Jv)
    for s in range(M):          # the dense Jacobian of the definition, sample by sample; symmetric
        J = complex_step_jacobian(lambda r: _normalised(r[None], n, centred, eps)[0], x[s])
        scale = np.abs(v[s]).sum() / sigma[s].min()    # the terms' size (their difference may be far smaller)
        np.testing.assert_allclose(Jv[s], J @ v[s], rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(J, J.T, rtol=0, atol=1e-13 / sigma[s].min())


@st.composite
def _slices(draw):
    M, H, T = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 5))
    axis, causal = draw(st.integers(0, 2)), draw(st.booleans())
    causal = causal and axis == 2
    z = np.random.default_rng(draw(st.integers(0, 2 ** 16))).normal(size=(M, H * T * T)) * draw(st.sampled_from([1.0, 30.0]))
    if draw(st.booleans()):
        z = np.round(z)             # ties, zeros
    shape = (H, T, T)
    positions = np.moveaxis(np.arange(H * T * T).reshape(shape), axis, -1).reshape(-1, T)
    rows = np.moveaxis(np.broadcast_to(np.arange(T)[:, None], (H, T, T)), axis, -1).reshape(-1, T)
    keep = (np.arange(T)[None, :] <= rows) if causal else np.ones(positions.shape, dtype=bool)
    return z, positions, np.ascontiguousarray(keep)


def _softmax(z, positions, keep):
    """The definition: ``exp(z) / sum exp(z)`` over the kept entries of every slice, 0 elsewhere."""
    out = np.zeros(z.shape, dtype=z.dtype)
    for k, (pos, kept) in enumerate(zip(positions, keep)):
        e = np.exp(z[:, pos[kept]] - z[:, pos[kept]].real.max(axis=1, keepdims=True))
        out[:, pos[kept]] = e / e.sum(axis=1, keepdims=True)
    return out


@settings(max_examples=60, deadline=None)
@given(_slices())
def test_softmax_slices_and_its_tangent_equal_the_definition_and_its_jacobian(case):
    z, positions, keep = case
    M = z.shape[0]
    y, out = np.empty((M,) + positions.shape), np.full(z.shape, np.nan)
    softmax_slices(z, positions, keep, y, out)
    np.testing.assert_allclose(out, _softmax(z, positions, keep), **ROUNDING)
    np.testing.assert_array_equal(y, out[:, positions])
    v = np.random.default_rng(2).normal(size=z.shape)
    Jv = np.full(z.shape, np.nan)
    softmax_tangent(y, positions, v, Jv)
    for s in range(M):
        J = complex_step_jacobian(lambda r: _softmax(r[None], positions, keep)[0], z[s])
        np.testing.assert_allclose(Jv[s], J @ v[s], rtol=0, atol=1e-14 * (1.0 + np.abs(v[s]).sum()))
