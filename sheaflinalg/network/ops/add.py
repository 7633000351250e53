"""``add``: the sum of two or more parents of one shape (residual connections)."""

import numpy as np

from ...kernels.elementwise import checked_add
from .relu import rectifier_slope
from .rule import MANY, Placement, identity_map


class Add(Placement):
    """``x_v = sum of the parents``: every restriction map is the identity.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("s", "add", ["x", "x"]), [(2, 3), (2, 3)])
    (2, 3)
    """

    name = "add"
    min_inputs, max_inputs = 2, MANY

    def shape(self, node, parent_shapes):
        if any(p != parent_shapes[0] for p in parent_shapes):
            raise ValueError(f"node {node.name!r} (add): its parents {list(node.inputs)} have different shapes "
                             f"{parent_shapes}")
        return parent_shapes[0]

    def forward(self, node, graph):
        def step(inputs, out, pattern, frozen):
            np.add(inputs[0], inputs[1], out=out)
            for x in inputs[2:]:
                out += x
        return step

    def checked_forward(self, node, graph, then=None):
        slope = rectifier_slope(then)
        if len(node.inputs) != 2 or (then is not None and slope is None):
            return None

        def step(inputs, out, then_out, then_mask):
            return checked_add(inputs[0], inputs[1], out, slope or 0.0, then_mask, then_out, then is not None)
        return step, False

    def blocks(self, node, graph, pattern=None):
        return [np.ones(graph.sizes[node.name]) for _ in node.inputs]

    def maps(self, node, graph):
        return identity_map, identity_map


RULE = Add()
