"""``reshape``: the same entries in another per-sample shape (flatten, unflatten, view)."""

import math
import numbers

import numpy as np

from .rule import Placement, identity_map


class Reshape(Placement):
    """A stalk flattened in C order does not change: the restriction map is the identity.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("f", "reshape", ["x"], {"shape": (6,)}), [(2, 3)])
    (6,)
    """

    name = "reshape"
    attrs = ("shape",)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        shape = node.attrs["shape"]
        shape = tuple(shape) if not isinstance(shape, numbers.Integral) else (shape,)
        if not shape or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1
                                for n in shape) or math.prod(shape) != math.prod(parent):
            raise ValueError(f"node {node.name!r} (reshape): cannot reshape {parent} to {node.attrs['shape']!r}")
        return tuple(int(n) for n in shape)

    def forward(self, node, graph):
        def step(inputs, out, pattern, frozen):
            out[...] = inputs[0]
        return step

    def blocks(self, node, graph, pattern=None):
        return [np.ones(graph.sizes[node.name])]

    def maps(self, node, graph):
        return identity_map, identity_map


RULE = Reshape()
