"""``constant``: a node without parents whose value is a parameter, the same for every sample (a vision
transformer's class token, expanded over the batch before it is concatenated to the tokens).

Its defining edge is ``x_v - c``: no restriction map, the constant ``c`` through the ones block.
"""

import numpy as np

from .rule import OpRule


def no_parent(i, x, pattern):
    """The map of a parent the node does not have."""
    raise IndexError("a constant node has no parents: it has no restriction maps")


class Constant(OpRule):
    """The value ``c`` (per-sample shape ``value.shape``) of every sample; its velocity is ``-dE/dc``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> RULE.shape(sl.Node("cls", "constant", [], params={"value": np.zeros((1, 4))}), [])
    (1, 4)
    """

    name = "constant"
    params = ("value",)
    min_inputs = max_inputs = 0
    has_bias = True

    def shape(self, node, parent_shapes):
        value = node.params["value"]
        if value.ndim == 0 or value.size == 0:
            raise ValueError(f"node {node.name!r} (constant): value must have at least one axis and one entry, got "
                             f"shape {value.shape}")
        return value.shape

    def forward(self, node, graph):
        value = node.params["value"].ravel()

        def step(inputs, out, pattern, frozen):
            out[...] = value
        return step

    def blocks(self, node, graph, pattern=None):
        return []

    def maps(self, node, graph):
        return no_parent, no_parent

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return node.params["value"].ravel()

    def norm_bound(self, node, graph):
        return 0.0

    def velocity(self, node, graph):
        shape = node.params["value"].shape

        def velocity(x, e):
            return {"value": e.sum(axis=0).reshape(shape)}
        return velocity

    def work(self, node, graph):
        return graph.sizes[node.name]

    def nnz(self, node, graph):
        return graph.sizes[node.name], 0


RULE = Constant()
