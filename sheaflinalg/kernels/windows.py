"""Index arithmetic of sliding windows (convolution and pooling), written once.

Every convolution, pooling and adaptive pooling map of the package reads its
geometry from here: the forward products, the transposed products and the
sparse restriction maps are all built from :func:`window_indices`, so they
cannot disagree about which input feeds which output.

Spatial positions are flattened in C order (for 2-D: ``row * width + col``).
"""

import functools

import numpy as np
from numba import njit


def output_size(size, kernel, stride, padding, dilation=1, ceil_mode=False):
    """Output length of a window sweep along one axis (PyTorch's rule).

    ``ceil_mode`` rounds the number of strides up, so that a last window may run past the padded end
    (it reads only the entries it covers), but drops a last window that would start past the end of the
    input and its left padding (PyTorch's rule: every window starts inside the input or its left padding).

    Examples
    --------
    >>> output_size(40, 5, 2, 1), output_size(6, 3, 2, 0), output_size(6, 3, 2, 0, ceil_mode=True)
    (19, 2, 3)
    >>> output_size(5, 2, 2, 1, ceil_mode=True)     # ceil gives 4, but window 3 would start at 6 - 1 = 5 >= 5
    3
    """
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    n = -(-span // stride) + 1
    return n - 1 if (n - 1) * stride >= size + padding else n


#: Bytes per entry of a window table while it is built: the int64 table and up to three int64
#: temporaries of its size (positions, the padding test, the conversion).
TABLE_ENTRY_BYTES = 32
#: Bytes of one small numpy array besides its data (``sys.getsizeof(np.arange(0))``).
ARRAY_BYTES = 112


def window_table_bytes(in_spatial, kernel, stride, padding, dilation, ceil_mode=False):
    """Peak bytes :func:`window_indices` needs for this geometry (exact integers, nothing allocated).

    Callers check it against the memory available before they build the table (a kernel of
    ``2**40`` taps or an input of ``10**9`` positions would end in numpy's ``MemoryError``).

    Examples
    --------
    >>> window_table_bytes((10**9,), (2,), (2,), (0,), (1,)) // 2**30
    29
    """
    entries = 1
    for size, k, s, p, d in zip(in_spatial, kernel, stride, padding, dilation):
        entries *= max(0, output_size(size, k, s, p, d, ceil_mode)) * k
    return TABLE_ENTRY_BYTES * entries


def adaptive_table_bytes(in_spatial, out_spatial):
    """Peak bytes :func:`adaptive_windows` needs (its per-window arrays and its table), nothing allocated.

    Examples
    --------
    >>> adaptive_table_bytes((10,), (10**9,)) // 2**30
    387
    """
    n_out, widest, per_axis = 1, 1, 0
    for size, n in zip(in_spatial, out_spatial):
        w = -(-size // n) + 1              # the widest window along this axis
        n_out, widest = n_out * n, widest * w
        per_axis += n * (ARRAY_BYTES + 8 * w)
    return per_axis + n_out * (2 * ARRAY_BYTES + TABLE_ENTRY_BYTES * widest)


def window_indices(in_spatial, kernel, stride, padding, dilation, ceil_mode=False):
    """Flat input positions read by every output position and kernel offset.

    Parameters
    ----------
    in_spatial, kernel, stride, padding, dilation : tuple of int
        One entry per spatial axis (1 or 2 axes).
    ceil_mode : bool, optional
        PyTorch's ``ceil_mode`` (:func:`output_size`): a last window may run past the padded end.

    Returns
    -------
    index : ndarray of int64, shape (n_out_positions, n_kernel_offsets)
        ``index[p, q]`` is the flat input position that kernel offset ``q``
        (C order over the kernel's axes) reads for output position ``p``
        (C order over the output's axes), or ``-1`` where it falls in the padding (or past it, in ceil mode).
    out_spatial : tuple of int

    Examples
    --------
    >>> index, out = window_indices((4,), (3,), (1,), (1,), (1,))
    >>> out, index.tolist()
    ((4,), [[-1, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, -1]])
    """
    key = tuple(tuple(int(v) for v in arg) for arg in (in_spatial, kernel, stride, padding, dilation))
    if window_table_bytes(*key, ceil_mode) > CACHED_TABLE_BYTES:
        return _window_indices(*key, bool(ceil_mode))
    index, out_spatial = _cached_window_indices(*key, bool(ceil_mode))
    return index.copy(), out_spatial


#: Largest table (:func:`window_table_bytes`) that :func:`window_indices` keeps for the next call with the same
#: geometry: every pass of a training step builds its nodes' geometry again (the graph is rebuilt with the new
#: weights), and the tables of a small CNN took 1 ms of a 20 ms batch.  Copies are handed out (a caller may
#: write into its table); the cache holds at most :data:`CACHED_TABLES` of them.
CACHED_TABLE_BYTES = 1 << 22
CACHED_TABLES = 64


@functools.lru_cache(maxsize=CACHED_TABLES)
def _cached_window_indices(in_spatial, kernel, stride, padding, dilation, ceil_mode):
    return _window_indices(in_spatial, kernel, stride, padding, dilation, ceil_mode)


def _window_indices(in_spatial, kernel, stride, padding, dilation, ceil_mode):
    """:func:`window_indices`, built."""
    axes = []
    out_spatial = []
    for size, k, s, p, d in zip(in_spatial, kernel, stride, padding, dilation):
        n_out = output_size(size, k, s, p, d, ceil_mode)
        pos = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :] * d   # (n_out, k) input positions
        axes.append((pos, size))
        out_spatial.append(n_out)
    if len(axes) == 1:
        (pos, size), = axes
        return np.where((pos >= 0) & (pos < size), pos, -1).astype(np.int64), tuple(out_spatial)
    (pr, hr), (pc, wc) = axes
    rows = pr[:, None, :, None]          # (out_r, 1, k_r, 1)
    cols = pc[None, :, None, :]          # (1, out_c, 1, k_c)
    inside = (rows >= 0) & (rows < hr) & (cols >= 0) & (cols < wc)
    flat = np.where(inside, rows * wc + cols, -1)
    return flat.reshape(len(pr) * len(pc), pr.shape[1] * pc.shape[1]).astype(np.int64), tuple(out_spatial)


def adaptive_windows(in_spatial, out_spatial):
    """Windows of an adaptive pooling (PyTorch's rule: ``start = floor(i L / n)``, ``end = ceil((i + 1) L / n)``).

    Returns
    -------
    index : ndarray of int64, shape (n_out_positions, max_window)
        Flat input positions of every output position's window, ``-1``-padded
        (adaptive windows may differ in size).
    count : ndarray of int64, shape (n_out_positions,)
        Number of valid entries of each row.

    Examples
    --------
    >>> index, count = adaptive_windows((5,), (2,))
    >>> index.tolist(), count.tolist()
    ([[0, 1, 2], [2, 3, 4]], [3, 3])
    """
    per_axis = []
    for size, n in zip(in_spatial, out_spatial):
        i = np.arange(n)
        start, end = (i * size) // n, -((-(i + 1) * size) // n)
        per_axis.append([np.arange(a, b) for a, b in zip(start, end)])
    strides = np.cumprod((list(in_spatial[1:]) + [1])[::-1])[::-1]
    windows = [np.zeros(1, dtype=np.int64)]
    for axis, ranges in enumerate(per_axis):
        windows = [(w[:, None] + r[None, :] * strides[axis]).ravel() for w in windows for r in ranges]
    count = np.array([w.size for w in windows], dtype=np.int64)
    index = np.full((len(windows), int(count.max())), -1, dtype=np.int64)
    for p, w in enumerate(windows):
        index[p, :w.size] = w
    return index, count


@njit(cache=True, nogil=True)
def window_loop_sizes(x, index, channels):
    """``(samples, n_out_positions, window, n_in_positions)`` of a window loop over the batch ``x``
    (``(samples, channels * n_in_positions)``) and the window table ``index``."""
    n_out, K = index.shape
    return x.shape[0], n_out, K, x.shape[1] // channels
