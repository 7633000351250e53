"""``adaptive_avgpool``: PyTorch's adaptive average pool to a given ``output_size`` per channel."""

import numbers

from .avgpool import AveragePool
from .rule import OpRule
from ...kernels.windows import adaptive_table_bytes
from .geometry import adaptive_pool_windows, check_table, ints, spatial_axes


class AdaptiveAveragePool(AveragePool):
    """An average over windows that PyTorch's adaptive rule cuts (``floor``/``ceil`` of the scaled bounds).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("g", "adaptive_avgpool", ["x"], {"output_size": 1}), [(3, 5, 5)])
    (3, 1, 1)
    """

    name = "adaptive_avgpool"
    attrs = ("output_size",)
    optional = OpRule.optional

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        size = node.attrs["output_size"]
        n_axes = len(parent) - 1 if isinstance(size, numbers.Integral) else len(tuple(size))
        spatial = spatial_axes(node, parent, n_axes)
        out = ints(node, "output_size", n_axes, 1)
        check_table(node, adaptive_table_bytes(spatial, out))
        return (parent[0],) + out

    def window(self, node, parent_shape):
        raise ValueError(f"node {node.name!r} (adaptive_avgpool) has no sliding window (its windows are cut "
                         "by the output size)")

    def windows(self, node, graph):
        return adaptive_pool_windows(node, graph)

    def nnz(self, node, graph):
        n, n_in = graph.sizes[node.name], graph.sizes[node.inputs[0]]
        K = self.windows(node, graph)[2].shape[1]
        return n * K, n_in * K * 2 ** (len(graph.shapes[node.inputs[0]]) - 1)


RULE = AdaptiveAveragePool()
