"""The softmax of slices of a row (attention's weights), with its tangent's product, in one compiled pass a slice.

Row ``s`` of a value holds ``S`` slices of ``L`` entries at the positions ``positions[k, :]`` (any axis of the
per-sample shape); ``keep[k, j]`` says whether entry ``j`` of slice ``k`` takes part (a causal mask: a kept
entry's probability, the others are 0).  The expressions are those of ``network/ops/softmax.py``
(``y = exp(z - max) / sum exp(z - max)``, and ``J x = y (x - y . x)`` with ``J = diag(y) - y y^T``) in the
same order; the sums are sequential where numpy's are pairwise, so the results are numpy's to rounding.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def softmax_slices(z, positions, keep, y, out):
    """``y[s, k, :]`` (``(M, S, L)``) and ``out[s, positions[k, :]]`` get the softmax of slice ``k`` of row ``s``
    of ``z`` (masked entries: 0)."""
    S, L = positions.shape
    for s in range(z.shape[0]):
        for k in range(S):
            top = -np.inf
            for j in range(L):
                if keep[k, j]:
                    top = max(top, z[s, positions[k, j]])
            total = 0.0
            for j in range(L):
                e = np.exp(z[s, positions[k, j]] - top) if keep[k, j] else 0.0
                y[s, k, j] = e
                total += e
            for j in range(L):
                p = y[s, k, j] / total
                y[s, k, j] = p
                out[s, positions[k, j]] = p


@njit(cache=True, nogil=True)
def softmax_tangent(y, positions, x, out):
    """``out[s, positions[k, :]] = J x`` of every slice (``J`` symmetric: also ``J^T x``); ``out`` has every
    position of ``positions`` written."""
    S, L = positions.shape
    for s in range(x.shape[0]):
        for k in range(S):
            dot = 0.0
            for j in range(L):
                dot += y[s, k, j] * x[s, positions[k, j]]
            for j in range(L):
                out[s, positions[k, j]] = y[s, k, j] * (x[s, positions[k, j]] - dot)
