"""Normalisations over groups of consecutive entries (layer, group and RMS norms): the value with the statistics
its tangent reads, and the tangent's product, each in one compiled pass over a sample's groups.

Rows are samples; row ``s`` holds ``G`` groups of ``n`` consecutive entries.  The expressions are those of
``network/ops/normalisation.py`` (``y = (x - m) / sigma``, ``sigma = sqrt(mean((x - m)^2) + eps)``, and
``J x = (x - (y . x) y / n - c mean(x)) / sigma``) in the same order; only the sums over a group are
sequential where numpy's are pairwise, so the results are numpy's to rounding.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def normalise_groups(x, n, centred, eps, y, sigma, out):
    """``y`` (C-ordered rows) and ``out`` (rows of any stride) both get ``(x - m) / sigma`` of every group of
    ``n`` entries of the rows ``x``, ``sigma`` (``(M, G)``) its ``sigma``; ``m`` is the group's mean when
    ``centred``, else 0."""
    for s in range(x.shape[0]):
        for g in range(sigma.shape[1]):
            first = g * n
            m = _group_mean(x, s, first, n) if centred else 0.0
            square = 0.0
            for i in range(first, first + n):
                d = x[s, i] - m
                square += d * d
            sig = np.sqrt(square / n + eps)
            sigma[s, g] = sig
            for i in range(first, first + n):
                v = (x[s, i] - m) / sig
                y[s, i] = v
                out[s, i] = v


@njit(cache=True, nogil=True)
def groups_tangent(y, sigma, x, centred, out):
    """``out = J x`` group by group (``J`` of the statistics ``y``, ``sigma``: symmetric, so also ``J^T x``)."""
    n = y.shape[1] // sigma.shape[1]
    for s in range(x.shape[0]):
        for g in range(sigma.shape[1]):
            first = g * n
            dot = 0.0
            for i in range(first, first + n):
                dot += y[s, i] * x[s, i]
            m = _group_mean(x, s, first, n) if centred else 0.0
            sig = sigma[s, g]
            for i in range(first, first + n):
                out[s, i] = (x[s, i] - dot * y[s, i] / n - m) / sig


@njit(cache=True, nogil=True, inline="always")
def _group_mean(x, s, first, n):
    """The mean of the entries ``first .. first + n - 1`` of row ``s``."""
    total = 0.0
    for i in range(first, first + n):
        total += x[s, i]
    return total / n
