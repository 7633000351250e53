"""Convolution products on batches of flattened feature maps: the forward map ``F x`` and its transpose ``F^T y``.

Both read the geometry from one :class:`ConvGeometry` (built by
:func:`conv_geometry` from :func:`~sheaflinalg.kernels.windows.window_indices`),
so they are exact transposes of each other and of the sparse restriction map.
Samples are rows; a feature map is flattened in C order (channel, then positions).
"""

from collections import namedtuple

import numpy as np

from .windows import window_indices

#: index: (n_out_positions, n_kernel_offsets) int64 flat input positions, -1 in the padding.
ConvGeometry = namedtuple("ConvGeometry", "index in_channels out_channels groups n_in_positions n_out_positions")


def conv_geometry(in_channels, in_spatial, out_channels, groups, kernel, stride, padding, dilation):
    """The :class:`ConvGeometry` of a convolution (tuples per spatial axis)."""
    index, out_spatial = window_indices(in_spatial, kernel, stride, padding, dilation)
    return ConvGeometry(index, int(in_channels), int(out_channels), int(groups), int(np.prod(in_spatial)),
                        int(np.prod(out_spatial)))


def _columns(x, geom):
    """im2col: ``(M, groups, n_out_positions, in_channels_per_group * K)``, zero in the padding."""
    M = x.shape[0]
    cin, npos = geom.in_channels, geom.n_in_positions
    padded = np.zeros((M, cin, npos + 1))
    padded[:, :, :npos] = x.reshape(M, cin, npos)
    cols = padded[:, :, geom.index]                    # (M, cin, n_out, K); index -1 reads the zero column
    g = geom.groups
    cols = cols.reshape(M, g, cin // g, geom.n_out_positions, -1).transpose(0, 1, 3, 2, 4)
    return cols.reshape(M, g, geom.n_out_positions, -1)


def conv_forward(x, weight, bias, geom):
    """``F x + b`` for a batch ``x`` of shape (M, in_channels * n_in_positions); weight (C_out, C_in/groups, *k)."""
    M, g = x.shape[0], geom.groups
    cols = _columns(x, geom)
    W = weight.reshape(g, geom.out_channels // g, -1)               # (g, cout/g, cin/g*K)
    out = np.einsum("mgpk,gok->mgop", cols, W, optimize=True)
    out = out.reshape(M, geom.out_channels, geom.n_out_positions) + bias[None, :, None]
    return np.ascontiguousarray(out.reshape(M, -1))


def conv_transpose(y, weight, geom):
    """``F^T y`` for a batch ``y`` of shape (M, out_channels * n_out_positions) (no bias)."""
    M, g = y.shape[0], geom.groups
    cin, npos, nout = geom.in_channels, geom.n_in_positions, geom.n_out_positions
    W = weight.reshape(g, geom.out_channels // g, cin // g, -1)       # (g, o, c, K)
    Y = y.reshape(M, g, geom.out_channels // g, nout)
    contrib = np.einsum("mgop,gock->mgcpk", Y, W, optimize=True)      # (M, g, c, n_out, K)
    out = np.zeros((M, cin, npos + 1))
    contrib = contrib.reshape(M, cin, nout * geom.index.shape[1])
    target = np.where(geom.index < 0, npos, geom.index).ravel()
    for c in range(cin):
        np.add.at(out[:, c, :], (slice(None), target), contrib[:, c, :])
    return np.ascontiguousarray(out[:, :, :npos].reshape(M, -1))
