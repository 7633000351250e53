"""Entry-by-entry maps of the graph forward pass in one compiled pass: rectifiers with their masks, batch norm.

Samples are rows; a feature map is flattened in C order, channel first.  The ``checked_*`` kernels
write a node's value and the rectifier that follows it in one pass, and say whether every value they
read and wrote is finite: on ResNet-50's maps (memory-bound) a batch norm, its rectifier and the
three checks took twice as long as separate passes (``docs/performance.md``, issue 33).  Their check is
an "or" of per-entry flags, not a float sum: a sum is one chain of dependent additions that the compiler
may not reorder, so it is not vectorised and took 1.5 ns an entry against 0.35-0.7 ns for the flags.
"""

import numpy as np
from numba import njit

from .elementary import exp, tanh
from .normal import normal_lower_tail


@njit(cache=True, nogil=True)
def rectify(z, slope, mask, out, agrees, frozen):
    """``out = z`` where the mask is set, ``slope * z`` elsewhere (ReLU: ``slope = 0``; leaky ReLU).

    ``frozen`` False: the mask is read off ``z`` (``z >= 0``, the package's rule) and written into
    ``mask``.  ``frozen`` True: ``mask`` is given, and ``agrees[s]`` is cleared for a sample whose
    mask disagrees with the sign of ``z`` somewhere (``z == 0`` agrees with either label).
    """
    for s in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[s, j]
            active = v >= 0
            if frozen:
                if mask[s, j] != active and v != 0:
                    agrees[s] = False
                active = mask[s, j]
            else:
                mask[s, j] = active
            out[s, j] = _rectified(v, active, slope)


@njit(cache=True, nogil=True, inline="always")
def _rectified(v, active, slope):
    """A rectifier's value at ``v`` on the piece ``active``."""
    return v if active else slope * v


@njit(cache=True, nogil=True, inline="always")
def _not_finite(v):
    """Whether ``v`` is NaN or infinite (``v - v`` is 0 for a finite ``v``, NaN otherwise)."""
    return (v - v) != 0.0


@njit(cache=True, nogil=True)
def all_finite(x):
    """Whether every entry of the 2-D array ``x`` (rows of any stride) is finite: an "or" of per-entry flags
    (no float sum, which may overflow and keeps the loop scalar), in one compiled call instead of numpy's
    reduction and its Python overhead (a graph network's forward pass checks every node's block)."""
    bad = False
    for s in range(x.shape[0]):
        for j in range(x.shape[1]):
            bad |= _not_finite(x[s, j])
    return not bad


@njit(cache=True, nogil=True, inline="always")
def _rectify_entry(v, slope, mask, out, s, j, then):
    """Whether a value ``v`` just written is not finite; with ``then``, also ``out[s, j]`` and ``mask[s, j]``
    of a rectifier at ``v`` (mask read off ``v``), and whether ``v`` or ``out[s, j]`` is not finite."""
    if not then:
        return _not_finite(v)
    active = v >= 0
    mask[s, j] = active
    r = _rectified(v, active, slope)
    out[s, j] = r
    return _not_finite(v) | _not_finite(r)


@njit(cache=True, nogil=True)
def channel_affine(x, scale, shift, out):
    """``out[s, c * n + i] = x[s, c * n + i] * scale[c] + shift[c]`` (an eval-mode batch norm)."""
    C = scale.shape[0]
    n = x.shape[1] // C
    for s in range(x.shape[0]):
        for c in range(C):
            a, b = scale[c], shift[c]
            for i in range(n):
                out[s, c * n + i] = _affine(x[s, c * n + i], a, b)


@njit(cache=True, nogil=True, inline="always")
def _affine(v, a, b):
    """A batch norm's value at ``v`` with its channel's scale and shift."""
    return v * a + b


@njit(cache=True, nogil=True)
def checked_affine(x, scale, shift, out, slope, mask, rectified, then):
    """:func:`channel_affine` (``x`` into ``out``), and with ``then`` a rectifier of it, read off it
    (``mask``, ``rectified``: as :func:`rectify` with ``frozen`` False), in one pass.

    Returns whether every entry of ``x``, ``out`` and (with ``then``) ``rectified`` is finite.
    """
    C = scale.shape[0]
    n = x.shape[1] // C
    bad = False
    for s in range(x.shape[0]):
        for c in range(C):
            a, b = scale[c], shift[c]
            for i in range(n):
                j = c * n + i
                v = x[s, j]
                y = _affine(v, a, b)
                out[s, j] = y
                bad |= _not_finite(v) | _rectify_entry(y, slope, mask, rectified, s, j, then)
    return not bad


@njit(cache=True, nogil=True)
def checked_add(x, y, out, slope, mask, rectified, then):
    """``out = x + y``, and with ``then`` a rectifier of it (as :func:`checked_affine`), in one pass.

    Returns whether every entry of ``out`` and (with ``then``) ``rectified`` is finite (``x`` and ``y``
    are not checked).
    """
    bad = False
    for s in range(x.shape[0]):
        for j in range(x.shape[1]):
            v = x[s, j] + y[s, j]
            out[s, j] = v
            bad |= _rectify_entry(v, slope, mask, rectified, s, j, then)
    return not bad


@njit(cache=True, nogil=True, error_model="numpy")
def silu_both(z, value, slope):
    """``value = z s`` and ``slope = s (1 + z (1 - s))`` with ``s = 1 / (1 + exp(-z))``, entry by entry (SiLU's
    value and derivative in one pass over ``z``, rows of any stride).  ``s`` is ``1 / (1 + e)`` or ``e / (1 +
    e)`` with ``e = exp(-|z|)`` (:func:`~.elementary.exp`, which vectorises): no overflow, and both tails keep
    their relative accuracy."""
    for r in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[r, j]
            e = exp(-abs(v))
            s = (1.0 if v >= 0 else e) / (1.0 + e)
            value[r, j] = v * s
            slope[r, j] = s * (1.0 + v * (1.0 - s))


#: ``sqrt(2 / pi)`` and the cubic's coefficient of GELU's tanh form; ``1 / sqrt(2 pi)``.
GELU_K, GELU_C = np.sqrt(2.0 / np.pi), 0.044715
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


@njit(cache=True, nogil=True, error_model="numpy")
def gelu_both(z, value, slope, tanh_form):
    """GELU's value and derivative in one pass over ``z`` (rows of any stride): ``z Phi(z)`` and
    ``Phi(z) + z phi(z)``, or with ``tanh_form`` ``0.5 z (1 + t)`` and ``0.5 (1 + t) + 0.5 z (1 - t^2) K (1 + 3 C
    z^2)`` with ``t = tanh(K (z + C z^3))``.  ``Phi`` and ``phi`` from :func:`~.normal.normal_lower_tail` (one
    exponential for both), ``tanh`` from :func:`~.elementary.tanh`: no libm call, so both forms vectorise;
    within a few roundings of the exact values, the exact form's lower tail to its relative accuracy."""
    for r in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[r, j]
            if tanh_form:
                t = tanh(GELU_K * (v + GELU_C * v ** 3))
                value[r, j] = 0.5 * v * (1.0 + t)
                slope[r, j] = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * v * v)
            else:
                tail, density = normal_lower_tail(abs(v))
                gate = 1.0 - tail if v > 0 else tail
                value[r, j] = v * gate
                slope[r, j] = gate + v * density * _INV_SQRT_2PI
