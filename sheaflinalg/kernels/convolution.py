"""Convolution products on batches of flattened feature maps: the forward map ``F x`` and its transpose ``F^T y``.

Both read the geometry from one :class:`ConvGeometry` (built by
:func:`conv_geometry` from :func:`~sheaflinalg.kernels.windows.window_indices`),
so they are exact transposes of each other and of the sparse restriction map.
Samples are rows; a feature map is flattened in C order (channel, then positions).

How (measured, ``benchmarks/graph_forward.py`` and ``docs/performance.md``):
im2col + one BLAS product per group and chunk of samples.  A compiled kernel
copies the windows of a chunk of samples into the columns
``cols[c * K + q, s * n_out + p] = x[s, c, index[p, q]]`` (zero in the
padding), BLAS multiplies ``W (C_out, C_in K) @ cols``, and a second kernel
writes the product back sample by sample with the bias.  The transpose runs the
same steps backwards: ``W^T @ y`` then a scatter-add of the columns into their
input positions (col2im), in a fixed order.  A direct compiled convolution
(loops over channels, taps and positions) was 2 to 8 times slower than this on
every case measured, the numpy version before it (fancy-index gather, einsum,
``np.add.at``) 1.5 to 3.5 times forward and up to 6 times transposed.  One
product per sample straight into the sample's row (PyTorch's own float64
path) was no faster on ResNet-20's maps and 4 times slower on the MNIST-1D
CNN's short ones.  Chunks hold about :data:`CHUNK_ENTRIES`
column entries (they stay in the caches) and depend on the shapes only, so the
result of a batch never depends on the thread count.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .windows import window_indices

#: index: (n_out_positions, n_kernel_offsets) int64 flat input positions, -1 in the padding; taps: the same table
#: transposed, (n_kernel_offsets, n_out_positions) C-contiguous, as the im2col loops read it (along the positions:
#: 10-45% faster than reading a column of ``index``, on ResNet-50's maps).  Made by :func:`table_geometry`.
ConvGeometry = namedtuple("ConvGeometry", "index in_channels out_channels groups n_in_positions n_out_positions taps")

#: Column entries (float64) of one chunk of samples: 1 MB, half the L2 cache of a core or less.
CHUNK_ENTRIES = 1 << 17


def conv_geometry(in_channels, in_spatial, out_channels, groups, kernel, stride, padding, dilation):
    """The :class:`ConvGeometry` of a convolution (tuples per spatial axis).

    Examples
    --------
    >>> geom = conv_geometry(1, (5,), 2, 1, (3,), (2,), (1,), (1,))
    >>> geom.index.tolist(), geom.n_out_positions
    ([[-1, 0, 1], [1, 2, 3], [3, 4, -1]], 3)
    """
    index, out_spatial = window_indices(in_spatial, kernel, stride, padding, dilation)
    return table_geometry(index, in_channels, out_channels, groups, np.prod(in_spatial), np.prod(out_spatial))


def table_geometry(index, in_channels, out_channels, groups, n_in_positions, n_out_positions):
    """The :class:`ConvGeometry` of the window table ``index`` ``(n_out_positions, n_kernel_offsets)``.

    Examples
    --------
    >>> table_geometry(np.array([[-1, 0], [0, 1]]), 1, 1, 1, 2, 2).taps.tolist()
    [[-1, 0], [0, 1]]
    """
    index = np.ascontiguousarray(index, dtype=np.int64)
    return ConvGeometry(index, int(in_channels), int(out_channels), int(groups), int(n_in_positions),
                        int(n_out_positions), np.ascontiguousarray(index.T))


@njit(cache=True, nogil=True)
def columns(x, taps, cols, scatter):
    """im2col and its transpose (col2im), one loop: ``cols[c * K + q, s * n_out + p]`` <-> ``x[s, c * n_in + taps[q, p]]``.

    ``scatter`` False: ``cols`` receives the windows of ``x`` (0 where ``taps`` is -1).
    ``scatter`` True: every column entry is added to its input position in ``x`` (padding skipped),
    in a fixed order (channel, tap, sample, position).
    ``x`` (S, C * n_in) with C = ``cols.shape[0] // K``; ``taps`` (K, n_out); ``cols`` (C * K, S * n_out).
    """
    K, n_out = taps.shape
    C = cols.shape[0] // K
    S, n_in = x.shape[0], x.shape[1] // C
    for c in range(C):
        start = c * n_in
        for q in range(K):
            row, tap = c * K + q, taps[q]
            for s in range(S):
                base = s * n_out
                if scatter:
                    for p in range(n_out):
                        if tap[p] >= 0:
                            x[s, start + tap[p]] += cols[row, base + p]
                else:
                    for p in range(n_out):
                        i = tap[p]
                        cols[row, base + p] = x[s, start + i] if i >= 0 else 0.0


@njit(cache=True, nogil=True)
def channels_to_samples(r, bias, out):
    """``out[s, o * n + p] = r[o, s * n + p] + bias[o]``: a product ``(C, S * n)`` back to sample rows."""
    S = out.shape[0]
    C = r.shape[0]
    n = out.shape[1] // C
    for s in range(S):
        for o in range(C):
            b = bias[o]
            for p in range(n):
                out[s, o * n + p] = r[o, s * n + p] + b


@njit(cache=True, nogil=True)
def samples_to_channels(y, r):
    """``r[o, s * n + p] = y[s, o * n + p]``: sample rows to the channel-major layout of the products."""
    S = y.shape[0]
    C = r.shape[0]
    n = y.shape[1] // C
    for o in range(C):
        for s in range(S):
            for p in range(n):
                r[o, s * n + p] = y[s, o * n + p]


def _chunks(geom, M):
    """``(lo, hi, cols, prod)`` of every chunk of the ``M`` samples: its rows and its views of the work buffers.

    A chunk has about :data:`CHUNK_ENTRIES` column entries (at least one sample), by the shapes alone.
    """
    n_out, K = geom.index.shape
    S = max(1, min(M, CHUNK_ENTRIES // (geom.in_channels * K * n_out)))
    cols = np.empty((geom.in_channels * K, S * n_out))
    prod = np.empty((geom.out_channels, S * n_out))
    for lo in range(0, M, S):
        hi = min(M, lo + S)
        yield lo, hi, cols[:, :(hi - lo) * n_out], prod[:, :(hi - lo) * n_out]


def _grouped_weights(weight, geom):
    """The weight as ``(groups, C_out / groups, C_in / groups * K)`` float64."""
    return np.ascontiguousarray(weight, dtype=np.float64).reshape(geom.groups, geom.out_channels // geom.groups, -1)


def _grouped_product(A, B, out, groups, transpose):
    """``out_g = A_g @ B_g`` (or ``A_g^T @ B_g``) for the row groups of ``B`` and ``out``; ``A`` (g, o, c K)."""
    rows_b, rows_out = B.shape[0] // groups, out.shape[0] // groups
    for g in range(groups):
        a = A[g].T if transpose else A[g]
        np.matmul(a, B[g * rows_b:(g + 1) * rows_b], out=out[g * rows_out:(g + 1) * rows_out])


def conv_forward(x, weight, bias, geom, out=None):
    """``F x + b`` for a batch ``x`` of shape (M, in_channels * n_in_positions); weight (C_out, C_in/groups, *k).

    Returns (M, out_channels * n_out_positions), written into ``out`` when it is given (C-contiguous).
    A pointwise convolution (1x1, stride 1, no padding) multiplies each sample's map as it is, straight
    into its rows (:func:`_pointwise`); any other takes the columns of a chunk of samples (im2col).

    Examples
    --------
    >>> geom = conv_geometry(1, (4,), 1, 1, (2,), (1,), (0,), (1,))
    >>> conv_forward(np.array([[1.0, 2.0, 3.0, 4.0]]), np.array([[[1.0, 10.0]]]), np.zeros(1), geom).tolist()
    [[21.0, 32.0, 43.0]]
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    W = _grouped_weights(weight, geom)
    bias = np.ascontiguousarray(bias, dtype=np.float64)
    out = np.empty((x.shape[0], geom.out_channels * geom.n_out_positions)) if out is None else out
    if is_pointwise(geom):
        return _pointwise(x, W, bias, geom, out)
    for lo, hi, cols, prod in _chunks(geom, x.shape[0]):
        columns(x[lo:hi], geom.taps, cols, False)
        _grouped_product(W, cols, prod, geom.groups, transpose=False)
        channels_to_samples(prod, bias, out[lo:hi])
    return out


def is_pointwise(geom):
    """Whether every output position reads its own input position and nothing else (1x1, stride 1, no padding).

    Examples
    --------
    >>> is_pointwise(conv_geometry(3, (4, 4), 2, 1, (1, 1), (1, 1), (0, 0), (1, 1)))
    True
    >>> is_pointwise(conv_geometry(3, (4, 4), 2, 1, (1, 1), (2, 2), (0, 0), (1, 1)))
    False
    """
    n_out, K = geom.index.shape
    return K == 1 and n_out == geom.n_in_positions and bool(np.all(geom.index[:, 0] == np.arange(n_out)))


def _pointwise(x, W, bias, geom, out):
    """``out[s] = W_g @ x[s]`` group by group (maps ``(channels, positions)``), then the bias if any."""
    M, n = x.shape[0], geom.n_out_positions
    x3, out3 = x.reshape(M, geom.in_channels, n), out.reshape(M, geom.out_channels, n)
    rows_in, rows_out = geom.in_channels // geom.groups, geom.out_channels // geom.groups
    for k in range(geom.groups):
        np.matmul(W[k], x3[:, k * rows_in:(k + 1) * rows_in], out=out3[:, k * rows_out:(k + 1) * rows_out])
    if np.any(bias):
        out3 += bias[None, :, None]
    return out


def conv_transpose(y, weight, geom):
    """``F^T y`` for a batch ``y`` of shape (M, out_channels * n_out_positions) (no bias).

    Returns (M, in_channels * n_in_positions).

    Examples
    --------
    >>> geom = conv_geometry(1, (4,), 1, 1, (2,), (1,), (0,), (1,))
    >>> conv_transpose(np.array([[1.0, 0.0, 2.0]]), np.array([[[1.0, 10.0]]]), geom).tolist()
    [[1.0, 10.0, 2.0, 20.0]]
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    W = _grouped_weights(weight, geom)
    out = np.zeros((y.shape[0], geom.in_channels * geom.n_in_positions))
    for lo, hi, cols, prod in _chunks(geom, y.shape[0]):
        samples_to_channels(y[lo:hi], prod)
        _grouped_product(W, prod, cols, geom.groups, transpose=True)
        columns(out[lo:hi], geom.taps, cols, True)
    return out


def conv_weight_velocity(x, e, geom):
    """``sum over samples and positions of e (x's windows)^T``: the weight velocity of a shared convolution.

    ``x`` (M, in_channels * n_in_positions) is the parent's value, ``e`` (M, out_channels *
    n_out_positions) the node's edge residual.  Returns ``(weight_velocity, bias_velocity)``,
    shapes ``(C_out, C_in / groups, K)`` (reshape to the kernel's axes) and ``(C_out,)``: the
    derivative of ``-1/2 ||e||^2`` in the weight and the bias, ``e = w - F x - b``.  Chunks and
    their order depend on the shapes only.

    Examples
    --------
    >>> geom = conv_geometry(1, (4,), 1, 1, (2,), (1,), (0,), (1,))
    >>> dW, db = conv_weight_velocity(np.array([[1.0, 2.0, 3.0, 4.0]]), np.array([[1.0, 0.0, 2.0]]), geom)
    >>> dW.tolist(), db.tolist()
    ([[[7.0, 10.0]]], [3.0])
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    e = np.ascontiguousarray(e, dtype=np.float64)
    g = geom.groups
    c_out, c_in = geom.out_channels // g, geom.in_channels // g
    out = np.zeros((g, c_out, c_in * geom.index.shape[1]))
    bias = np.zeros(geom.out_channels)
    part = np.empty_like(out[0])
    for lo, hi, cols, prod in _chunks(geom, x.shape[0]):
        columns(x[lo:hi], geom.taps, cols, False)
        samples_to_channels(e[lo:hi], prod)
        for k in range(g):
            np.matmul(prod[k * c_out:(k + 1) * c_out], cols[k * c_in * geom.index.shape[1]:
                                                            (k + 1) * c_in * geom.index.shape[1]].T, out=part)
            out[k] += part
        bias += prod.sum(axis=1)
    return out.reshape(geom.out_channels, c_in, geom.index.shape[1]), bias
