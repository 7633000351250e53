"""Pooling on batches of flattened feature maps: averages over windows, the max with its argmax, and their transposes.

Windows come as a ``-1``-padded table ``index`` (n_out_positions, window)
of flat input positions (:mod:`sheaflinalg.kernels.windows`); ``-1`` entries
(padding, or the short windows of an adaptive pooling) take no part.  A
feature map is flattened in C order, channel first: input ``s, c, i`` is
``x[s, c * n_in_positions + i]`` and output ``s, c, p`` is
``y[s, c * n_out_positions + p]``.  Compiled loops, one pass over the windows;
every sum runs in the window's order, so the results do not depend on how a
batch is cut.
"""

import numpy as np
from numba import njit

from .windows import window_loop_sizes


@njit(cache=True, nogil=True)
def _average(x, index, divisor, y, transpose):
    """``y[s, c, p] = sum over the window of x / divisor[p]``, or (``transpose``) ``y[s, c, p] / divisor[p]``
    added to every input of the window (``x`` receives)."""
    C = y.shape[1] // index.shape[0]
    S, n_out, K, n_in = window_loop_sizes(x, index, C)
    for s in range(S):
        for c in range(C):
            for p in range(n_out):
                acc = y[s, c * n_out + p] / divisor[p] if transpose else 0.0
                for q in range(K):
                    i = index[p, q]
                    if i >= 0:
                        if transpose:
                            x[s, c * n_in + i] += acc
                        else:
                            acc += x[s, c * n_in + i]
                if not transpose:
                    y[s, c * n_out + p] = acc / divisor[p]


@njit(cache=True, nogil=True, inline="always")
def _window_max(x, s, base, row):
    """``(max, flat position)`` of the window ``row`` (a row of the table) of sample ``s`` of ``x`` whose channel
    starts at ``base``: the first maximum in the window's order."""
    best = -np.inf
    where = -1
    for q in range(row.shape[0]):
        i = row[q]
        if i >= 0 and (where < 0 or x[s, base + i] > best):   # strict: the first maximum wins
            best = x[s, base + i]
            where = base + i
    return best, where


@njit(cache=True, nogil=True)
def _max(x, index, values, argmax):
    C = values.shape[1] // index.shape[0]
    S, n_out, K, n_in = window_loop_sizes(x, index, C)
    for s in range(S):
        for c in range(C):
            for p in range(n_out):
                best, where = _window_max(x, s, c * n_in, index[p])
                values[s, c * n_out + p] = best
                argmax[s, c * n_out + p] = where


@njit(cache=True, nogil=True)
def _row_scale(x, s):
    """``max(1, max |x[s]|)``."""
    top = 1.0
    for i in range(x.shape[1]):
        top = max(top, abs(x[s, i]))
    return top


@njit(cache=True, nogil=True)
def _decided_max(z, forward, previous, index, keep_rtol, tie_rtol, out):
    C = out.shape[1] // index.shape[0]
    S, n_out, K, n_in = window_loop_sizes(z, index, C)
    for s in range(S):
        keep, tie = keep_rtol * _row_scale(z, s), tie_rtol * _row_scale(forward, s)
        for c in range(C):
            for p in range(n_out):
                o = c * n_out + p
                best, where = _window_max(z, s, c * n_in, index[p])
                old = previous[s, o]
                if z[s, old] >= best - keep:
                    where = old
                before = forward[s, old]
                if abs(forward[s, where] - before) <= tie and z[s, old] < before:
                    where = old
                out[s, o] = where


@njit(cache=True, nogil=True)
def _select_transpose(y, argmax, out):
    for s in range(y.shape[0]):
        for j in range(y.shape[1]):
            out[s, argmax[s, j]] += y[s, j]


def _check_x(x):
    return np.ascontiguousarray(x, dtype=np.float64)


def average_pool(x, channels, n_in_positions, index, divisor, out=None):
    """Mean of every window: ``sum of the window's inputs / divisor[p]`` for output position ``p``.

    ``x`` (M, channels * n_in_positions); ``divisor`` (n_out_positions,) float.
    Returns (M, channels * n_out_positions), written into ``out`` when it is given (C-contiguous).

    Examples
    --------
    >>> index = np.array([[0, 1], [2, -1]])
    >>> average_pool(np.array([[1.0, 3.0, 5.0]]), 1, 3, index, np.array([2.0, 1.0])).tolist()
    [[2.0, 5.0]]
    """
    out = np.empty((x.shape[0], channels * index.shape[0])) if out is None else out
    _average(_check_x(x), index, np.asarray(divisor, dtype=np.float64), out, False)
    return out


def average_pool_transpose(y, channels, n_in_positions, index, divisor):
    """The transpose of :func:`average_pool`: every output's ``y / divisor[p]`` scattered back over its window.

    ``y`` (M, channels * n_out_positions).  Returns (M, channels * n_in_positions).

    Examples
    --------
    >>> index = np.array([[0, 1], [1, 2]])
    >>> average_pool_transpose(np.array([[2.0, 4.0]]), 1, 3, index, np.array([2.0, 2.0])).tolist()
    [[1.0, 3.0, 2.0]]
    """
    out = np.zeros((y.shape[0], channels * n_in_positions))
    _average(out, index, np.asarray(divisor, dtype=np.float64), _check_x(y), True)
    return out


def max_pool(x, channels, n_in_positions, index, out=None, argmax=None):
    """Max of every window and its argmax, the first maximum in the window's order.

    ``out`` and ``argmax`` (optional, C-contiguous) receive the values and the argmax.

    Returns
    -------
    values : ndarray (M, channels * n_out_positions)
    argmax : ndarray of int64, same shape
        Flat position of the selected input in the per-sample stalk (``channel * n_in_positions + position``).

    Examples
    --------
    >>> values, argmax = max_pool(np.array([[1.0, 3.0, 3.0, 0.0]]), 1, 4, np.array([[0, 1, 2], [2, 3, -1]]))
    >>> values.tolist(), argmax.tolist()
    ([[3.0, 3.0]], [[1, 2]])
    """
    M = x.shape[0]
    values = np.empty((M, channels * index.shape[0])) if out is None else out
    argmax = np.empty((M, channels * index.shape[0]), dtype=np.int64) if argmax is None else argmax
    _max(_check_x(x), index, values, argmax)
    return values, argmax


def decided_max_pool(z, forward, previous, index, keep_rtol, tie_rtol):
    """The selections read off ``z`` against ``previous`` (the selections it was solved under) with the ties of
    the ``forward`` values decided, every window in one pass (the rules are
    :func:`~sheaflinalg.sheaf.matrix_free.switching.read_pattern`'s):

    - the first maximum of the window of ``z``, unless the previous selection is still a maximum up to
      ``keep_rtol`` times the sample's ``max(1, max |z|)`` (kept);
    - then the previous selection again wherever the one read was tied with it in ``forward`` (up to ``tie_rtol``
      times the sample's ``max(1, max |forward|)``) and ``z`` moved the previous one down from its forward value.

    ``z``, ``forward`` (M, ``channels * n_in_positions``), ``previous`` (M, ``channels * n_out_positions``) int64;
    ``index`` the window table.

    Examples
    --------
    >>> index, z = np.array([[0, 1]]), np.array([[1.0, 2.0]])
    >>> decided_max_pool(z, np.array([[3.0, 3.0]]), np.array([[0]]), index, 1e-12, 1e-12).tolist()  # tied, down
    [[0]]
    >>> decided_max_pool(z, np.array([[3.0, 1.0]]), np.array([[0]]), index, 1e-12, 1e-12).tolist()  # not tied
    [[1]]
    """
    out = np.empty(previous.shape, dtype=np.int64)
    _decided_max(_check_x(z), _check_x(forward), np.ascontiguousarray(previous, dtype=np.int64), index,
                 float(keep_rtol), float(tie_rtol), out)
    return out


def max_pool_transpose(y, argmax, n_parent):
    """The transpose of the max-pool selection ``argmax``: ``y`` added at the selected positions.

    ``y`` and ``argmax`` (M, n_outputs) (``argmax`` as :func:`max_pool` returns it); returns
    (M, ``n_parent``), the parent's stalk.  Overlapping windows that select one input add up.

    Examples
    --------
    >>> max_pool_transpose(np.array([[1.0, 2.0]]), np.array([[2, 2]]), 4).tolist()
    [[0.0, 0.0, 3.0, 0.0]]
    """
    argmax = np.ascontiguousarray(argmax, dtype=np.int64)
    if argmax.shape != y.shape or (argmax.size and not 0 <= argmax.min() <= argmax.max() < n_parent):
        raise ValueError(f"argmax must have the shape of y {y.shape} and entries in 0..{n_parent - 1}, got shape "
                         f"{argmax.shape}" + (f" and entries {argmax.min()}..{argmax.max()}" if argmax.size else ""))
    out = np.zeros((y.shape[0], int(n_parent)))
    _select_transpose(_check_x(y), argmax, out)
    return out
