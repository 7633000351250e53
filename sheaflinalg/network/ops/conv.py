"""``conv``: a 1-D or 2-D convolution (stride, padding, dilation, groups) with a per-channel bias."""

import numpy as np

from ...kernels.convolution import conv_forward, conv_transpose, conv_weight_velocity
from ...kernels.windows import window_table_bytes
from .geometry import (check_groups, check_table, conv_geometry_of, conv_window, ints, spatial_axes, window_output,
                       window_reach, window_table)
from .rule import OpRule, csr, per_channel

#: Largest work (frequencies x C_out x C_in x min(C_out, C_in) per group) of the Fourier norm bound.
FOURIER_WORK = 2e9


def fourier_norm(W, groups, spatial, padding, dilation):
    """Largest ``||W_hat(f)||_2`` over the DFT frequencies of the padded grid, per group; None if too costly.

    The zero-padded, strided convolution is a submatrix of the circular one on the padded grid, whose
    norm is that largest frequency response: a bound on the convolution's 2-norm.
    """
    kernel = W.shape[2:]
    grid = tuple(max(n + 2 * p, (k - 1) * d + 1) for n, k, p, d in zip(spatial, kernel, padding, dilation))
    per, cin = W.shape[0] // groups, W.shape[1]
    if np.prod(grid) * per * cin * min(per, cin) * groups > FOURIER_WORK:
        return None
    taps = np.zeros((groups, per, cin) + grid)
    spread = tuple(slice(0, (k - 1) * d + 1, d) for k, d in zip(kernel, dilation))
    taps[(slice(None),) * 3 + spread] = W.reshape((groups, per, cin) + kernel)
    axes = tuple(range(3, 3 + len(grid)))
    # real taps: the frequencies f and -f give conjugate matrices (same norm), so half the grid suffices
    hat = np.moveaxis(np.fft.rfftn(taps, axes=axes), (1, 2), (-2, -1))
    return float(np.max(np.linalg.norm(hat, ord=2, axis=(-2, -1))))


def conv_norm_bound(W, groups, window, geom):
    """A bound on the 2-norm of the convolution of ``geom`` (weight ``W``, ``window`` = ``(spatial, kernel, stride,
    padding, dilation)`` on its input), and so of its adjoint: the Fourier bound, or Schur's test when too costly."""
    spatial, _, _, padding, dilation = window
    fourier = fourier_norm(W, groups, spatial, padding, dilation)
    if fourier is not None:
        return fourier
    # sqrt(max row sum * max column sum) of |F| bounds ||F||_2 (Schur's test)
    ones = np.ones((1, geom.in_channels * geom.n_in_positions))
    rows = conv_forward(ones, np.abs(W), np.zeros(W.shape[0]), geom)
    cols = conv_transpose(np.ones((1, geom.out_channels * geom.n_out_positions)), np.abs(W), geom)
    return float(np.sqrt(rows.max() * cols.max()))


def conv_entries(W, groups, index, n_in):
    """``(rows, cols, vals)`` of the convolution's matrix ``(C_out * n_out, C_in * n_in)`` with weight ``W``
    ``(C_out, C_in / groups, *kernel)`` and window table ``index`` ``(n_out, K)`` (padding left out).

    Examples
    --------
    >>> index = np.array([[-1, 0], [0, 1]])
    >>> [a.tolist() for a in conv_entries(np.array([[[1.0, 2.0]]]), 1, index, 2)]
    [[0, 1, 1], [0, 0, 1], [2.0, 1.0, 2.0]]
    """
    n_out, K = index.shape
    cout, cin_g = W.shape[0], W.shape[1]
    per_group = cout // groups
    o = np.arange(cout)[:, None, None, None]
    p = np.arange(n_out)[None, :, None, None]
    c = (o // per_group) * cin_g + np.arange(cin_g)[None, None, :, None]    # global input channel
    pos = index[None, :, None, :]
    shape4 = (cout, n_out, cin_g, K)
    inside = np.broadcast_to(pos >= 0, shape4)
    rows = np.broadcast_to(o * n_out + p, shape4)[inside]
    cols = np.broadcast_to(c * n_in + pos, shape4)[inside]
    vals = np.broadcast_to(W.reshape(cout, 1, cin_g, K), shape4)[inside]
    return rows, cols, vals


class Conv(OpRule):
    """A convolution over a ``(channels, *spatial)`` parent, weight ``(C_out, C_in / groups, *kernel)``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("c", "conv", ["x"], {"stride": 2, "padding": 1, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((4, 1, 3)), "bias": np.zeros(4)})
    >>> RULE.shape(node, [(1, 8)])
    (4, 4)
    """

    name = "conv"
    params = ("weight", "bias")
    attrs = ("stride", "padding", "dilation", "groups")
    has_bias = True

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        W = node.params["weight"]
        n_axes = W.ndim - 2
        if n_axes not in (1, 2):
            raise ValueError(f"node {node.name!r} (conv): weight must be 3-D or 4-D, got shape {W.shape}")
        spatial = spatial_axes(node, parent, n_axes)
        stride, padding = ints(node, "stride", n_axes, 1), ints(node, "padding", n_axes, 0)
        dilation = ints(node, "dilation", n_axes, 1)
        groups = check_groups(node, W.shape[0], "output")
        if parent[0] != W.shape[1] * groups:
            raise ValueError(f"node {node.name!r} (conv) takes {W.shape[1] * groups} input channels, got shape {parent}")
        if node.params["bias"].shape != (W.shape[0],):
            raise ValueError(f"node {node.name!r} (conv): bias must have shape ({W.shape[0]},)")
        out = window_output(node, spatial, W.shape[2:], stride, padding, dilation)
        check_table(node, window_table_bytes(spatial, W.shape[2:], stride, padding, dilation))
        return (W.shape[0],) + out

    def window(self, node, parent_shape):
        """``(spatial, kernel, stride, padding, dilation)`` of the node's windows on its parent."""
        return conv_window(node, parent_shape)

    def forward(self, node, graph):
        geom = conv_geometry_of(node, graph)
        W, b = node.params["weight"], node.params["bias"]

        def step(inputs, out, pattern, frozen):
            conv_forward(inputs[0], W, b, geom, out=out)
        return step

    def blocks(self, node, graph, pattern=None):
        return [self._matrix(node, graph)]

    def _matrix(self, node, graph):
        """The convolution as a CSR matrix ``(out_channels * n_out, in_channels * n_in)`` (no bias)."""
        parent = graph.shapes[node.inputs[0]]
        index, _ = window_table(node, conv_window(node, parent))
        rows, cols, vals = conv_entries(node.params["weight"], node.attrs["groups"], index, int(np.prod(parent[1:])))
        return csr(rows, cols, vals, (graph.sizes[node.name], graph.sizes[node.inputs[0]]))

    def maps(self, node, graph):
        W, geom = node.params["weight"], conv_geometry_of(node, graph)
        zero = np.zeros(W.shape[0])
        return (lambda i, x, p: conv_forward(x, W, zero, geom)), (lambda i, y, p: conv_transpose(y, W, geom))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return per_channel(node, graph, node.params["bias"])

    def norm_bound(self, node, graph):
        window = conv_window(node, graph.shapes[node.inputs[0]])
        return conv_norm_bound(node.params["weight"], node.attrs["groups"], window, conv_geometry_of(node, graph))

    def velocity(self, node, graph):
        geom = conv_geometry_of(node, graph)
        shape = node.params["weight"].shape

        def velocity(x, e):
            weight, bias = conv_weight_velocity(x, e, geom)
            return {"weight": weight.reshape(shape), "bias": bias}
        return velocity

    def work(self, node, graph):
        return graph.sizes[node.name] * int(np.prod(node.params["weight"].shape[1:]))

    def nnz(self, node, graph):
        W = node.params["weight"]
        n, n_in = graph.sizes[node.name], graph.sizes[node.inputs[0]]
        kernel = conv_window(node, graph.shapes[node.inputs[0]])[1]
        return n * int(np.prod(W.shape[1:])) + n, n_in * W.shape[1] * window_reach(kernel)


RULE = Conv()
