"""Entry-by-entry maps of the graph forward pass in one compiled pass: rectifiers with their masks, batch norm.

Samples are rows; a feature map is flattened in C order, channel first.
"""

import numpy as np
from numba import njit


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
            out[s, j] = v if active else slope * v


@njit(cache=True, nogil=True)
def channel_affine(x, scale, shift, out):
    """``out[s, c * n + i] = x[s, c * n + i] * scale[c] + shift[c]`` (an eval-mode batch norm)."""
    C = scale.shape[0]
    n = x.shape[1] // C
    for s in range(x.shape[0]):
        for c in range(C):
            a, b = scale[c], shift[c]
            for i in range(n):
                out[s, c * n + i] = x[s, c * n + i] * a + b


@njit(cache=True, nogil=True)
def silu_both(z, value, slope):
    """``value = z s`` and ``slope = s (1 + z (1 - s))`` with ``s = 1 / (1 + exp(-z))``, entry by entry (SiLU's
    value and derivative in one pass over ``z``, rows of any stride)."""
    for r in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[r, j]
            s = 1.0 / (1.0 + np.exp(-v))
            value[r, j] = v * s
            slope[r, j] = s * (1.0 + v * (1.0 - s))
