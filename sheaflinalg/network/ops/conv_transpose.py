"""``conv_transpose``: a 1-D or 2-D transposed convolution (PyTorch's ``ConvTranspose1d/2d``, ONNX's
``ConvTranspose``) with a per-channel bias.

Its map is the adjoint of a convolution's: the convolution with the same weight, stride, padding and
dilation from the node's output positions to its parent's (:func:`~.geometry.conv_transpose_geometry_of`).
So its forward pass is that convolution's transposed product and its transpose is that convolution's
forward product (:mod:`sheaflinalg.kernels.convolution`, nothing of its own), and its norm bound is that
convolution's (a matrix and its adjoint have the same 2-norm).
"""

import numpy as np

from ...kernels.convolution import conv_forward, conv_transpose, conv_weight_velocity
from ...kernels.windows import window_table_bytes
from .conv import conv_entries, conv_norm_bound
from .geometry import (check_groups, check_table, conv_transpose_geometry_of, conv_window, ints, spatial_axes,
                       window_reach)
from .rule import OpRule, csr, per_channel


def transposed_size(size, kernel, stride, padding, dilation, output_padding):
    """Output length of a transposed convolution along one axis (PyTorch's and ONNX's rule).

    Examples
    --------
    >>> transposed_size(4, 3, 2, 1, 1, 1)
    8
    """
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


class ConvTranspose(OpRule):
    """A transposed convolution over a ``(C_in, *spatial)`` parent, weight ``(C_in, C_out / groups, *kernel)``:
    ``y[o, j] += W[c, o mod (C_out / groups), q] x[c, i]`` where ``j = i * stride - padding + q * dilation`` (per
    spatial axis, ``o`` in the group of ``c``), plus ``bias[o]``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("t", "conv_transpose", ["x"], {"stride": 2, "padding": 1, "output_padding": 1,
    ...                "dilation": 1, "groups": 1}, {"weight": np.ones((1, 4, 3)), "bias": np.zeros(4)})
    >>> RULE.shape(node, [(1, 4)])
    (4, 8)
    """

    name = "conv_transpose"
    params = ("weight", "bias")
    attrs = ("stride", "padding", "output_padding", "dilation", "groups")
    has_bias = True

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        W = node.params["weight"]
        n_axes = W.ndim - 2
        if n_axes not in (1, 2):
            raise ValueError(f"node {node.name!r} (conv_transpose): weight must be 3-D or 4-D (in_channels, "
                             f"out_channels / groups, *kernel), got shape {W.shape}")
        spatial = spatial_axes(node, parent, n_axes)
        stride, padding = ints(node, "stride", n_axes, 1), ints(node, "padding", n_axes, 0)
        dilation, extra = ints(node, "dilation", n_axes, 1), ints(node, "output_padding", n_axes, 0)
        groups = check_groups(node, W.shape[0], "input")
        if parent[0] != W.shape[0]:
            raise ValueError(f"node {node.name!r} (conv_transpose) takes {W.shape[0]} input channels (the weight's "
                             f"first axis), got shape {parent}")
        if node.params["bias"].shape != (W.shape[1] * groups,):
            raise ValueError(f"node {node.name!r} (conv_transpose): bias must have shape ({W.shape[1] * groups},)")
        if any(e >= s and e >= d for e, s, d in zip(extra, stride, dilation)):
            raise ValueError(f"node {node.name!r} (conv_transpose): output_padding {extra} must be smaller than the "
                             f"stride {stride} or the dilation {dilation} on every axis")
        out = tuple(transposed_size(*a) for a in zip(spatial, W.shape[2:], stride, padding, dilation, extra))
        if min(out) < 1:
            raise ValueError(f"node {node.name!r} (conv_transpose): its padding {padding} crops the whole output "
                             f"(spatial shape {out}) of the input of spatial shape {spatial}")
        check_table(node, window_table_bytes(out, W.shape[2:], stride, padding, dilation))
        return (W.shape[1] * groups,) + out

    def forward(self, node, graph):
        geom, W = conv_transpose_geometry_of(node, graph), node.params["weight"]
        bias = self.bias(node, graph)

        def step(inputs, out, pattern, frozen):
            np.add(conv_transpose(inputs[0], W, geom), bias, out=out)
        return step

    def blocks(self, node, graph, pattern=None):
        geom = conv_transpose_geometry_of(node, graph)
        rows, cols, vals = conv_entries(node.params["weight"], node.attrs["groups"], geom.index, geom.n_in_positions)
        return [csr(cols, rows, vals, (graph.sizes[node.name], graph.sizes[node.inputs[0]]))]

    def maps(self, node, graph):
        W, geom = node.params["weight"], conv_transpose_geometry_of(node, graph)
        zero = np.zeros(W.shape[0])
        return (lambda i, x, p: conv_transpose(x, W, geom)), (lambda i, y, p: conv_forward(y, W, zero, geom))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return per_channel(node, graph, node.params["bias"])

    def norm_bound(self, node, graph):
        window = conv_window(node, graph.shapes[node.name])
        return conv_norm_bound(node.params["weight"], node.attrs["groups"], window,
                               conv_transpose_geometry_of(node, graph))

    def velocity(self, node, graph):
        geom = conv_transpose_geometry_of(node, graph)
        W, channels = node.params["weight"], graph.shapes[node.name][0]

        def velocity(x, e):
            # <e, G_W^T x> = <G_W e, x>: the weight velocity of the convolution G reading e, with residual x
            weight, _ = conv_weight_velocity(e, x, geom)
            return {"weight": weight.reshape(W.shape), "bias": e.reshape(e.shape[0], channels, -1).sum(axis=(0, 2))}
        return velocity

    def work(self, node, graph):
        return graph.sizes[node.inputs[0]] * int(np.prod(node.params["weight"].shape[1:]))

    def nnz(self, node, graph):
        W = node.params["weight"]
        n_in = graph.sizes[node.inputs[0]]
        return (n_in * int(np.prod(W.shape[1:])) + graph.sizes[node.name],
                n_in * (W.shape[0] // node.attrs["groups"]) * window_reach(W.shape[2:]))


RULE = ConvTranspose()
