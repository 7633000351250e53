"""``avgpool``: a sliding-window average (kernel, stride, padding, ``count_include_pad``, ``ceil_mode``) per channel."""

from types import MappingProxyType

import numpy as np

from ...kernels.pooling import average_pool, average_pool_transpose
from .geometry import padded_window_sizes, pool_shape, pool_window, pool_windows, window_reach
from .rule import OpRule, csr, entries_touched, parameterless


def window_matrix(windows):
    """An average pool's windows ``(channels, n_in, index, divisor)`` as a CSR matrix (channels block-diagonal)."""
    channels, n_in, index, divisor = windows
    n_out = index.shape[0]
    c = np.arange(channels)[:, None, None]
    p = np.arange(n_out)[None, :, None]
    shape3 = (channels, n_out, index.shape[1])
    inside = np.broadcast_to(index[None] >= 0, shape3)
    rows = np.broadcast_to(c * n_out + p, shape3)[inside]
    cols = np.broadcast_to(c * n_in + index[None], shape3)[inside]
    vals = np.broadcast_to((1.0 / divisor)[None, :, None], shape3)[inside]
    return csr(rows, cols, vals, (channels * n_out, channels * n_in))


def nonnegative_norm(windows, n_in, n_out):
    """``sqrt(max row sum * max column sum)`` of an average pool (entries >= 0): a bound on its 2-norm."""
    rows = average_pool(np.ones((1, n_in)), *windows)
    cols = average_pool_transpose(np.ones((1, n_out)), *windows)
    return float(np.sqrt(rows.max() * cols.max()))


class AveragePool(OpRule):
    """The mean of every window, over the window's size or (``count_include_pad`` False) its inside entries.

    With ``ceil_mode`` a last window may run past the padded end (PyTorch's rule, ``kernels.windows.output_size``):
    it averages the input entries it covers, over the part of it inside the padded input
    (``count_include_pad``: padding counts, what lies past the padding does not) or over its inside entries.

    Subclasses give other windows (:meth:`windows`); the rest of the rule serves every average.
    """

    name = "avgpool"
    attrs = ("kernel_size", "stride", "padding", "count_include_pad", "ceil_mode")
    optional = MappingProxyType({"ceil_mode": False})
    velocity = staticmethod(parameterless)
    work = staticmethod(entries_touched)

    def shape(self, node, parent_shapes):
        if not isinstance(node.attrs["count_include_pad"], (bool, np.bool_)):
            raise ValueError(f"node {node.name!r} (avgpool): count_include_pad must be a bool")
        return pool_shape(node, parent_shapes[0])

    def windows(self, node, graph):
        """``(channels, n_in_positions, index, divisor)``: the window table and every window's divisor."""
        channels, n_in, index, _ = pool_windows(node, graph)
        divisor = (padded_window_sizes(node, graph) if node.attrs["count_include_pad"]
                   else (index >= 0).sum(axis=1).astype(np.float64))
        return channels, n_in, index, divisor

    def window(self, node, parent_shape):
        """``(spatial, kernel, stride, padding, dilation, ceil_mode)`` of the node's windows on its parent."""
        return pool_window(node, parent_shape)

    def forward(self, node, graph):
        windows = self.windows(node, graph)

        def step(inputs, out, pattern, frozen):
            average_pool(inputs[0], *windows, out=out)
        return step

    def blocks(self, node, graph, pattern=None):
        return [window_matrix(self.windows(node, graph))]

    def maps(self, node, graph):
        windows = self.windows(node, graph)
        return ((lambda i, x, p: average_pool(x, *windows)),
                (lambda i, y, p: average_pool_transpose(y, *windows)))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        return nonnegative_norm(self.windows(node, graph), graph.sizes[node.inputs[0]], graph.sizes[node.name])

    def nnz(self, node, graph):
        n, n_in = graph.sizes[node.name], graph.sizes[node.inputs[0]]
        kernel = pool_window(node, graph.shapes[node.inputs[0]])[1]
        return n * int(np.prod(kernel)), n_in * window_reach(kernel)


RULE = AveragePool()
