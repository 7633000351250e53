"""``permute``: the per-sample axes in another order (``Tensor.permute``, ``transpose``, ONNX ``Transpose``)."""

import numbers

import numpy as np

from .rule import Gather


def check_axes(node, parent):
    """``node.attrs['axes']`` as a tuple of ints, checked to be a permutation of the parent's axes."""
    axes = node.attrs["axes"]
    axes = (axes,) if isinstance(axes, numbers.Integral) else tuple(axes)
    if not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axes) or \
            sorted(axes) != list(range(len(parent))):
        raise ValueError(f"node {node.name!r} (permute): axes must be a permutation of the per-sample axes "
                         f"0..{len(parent) - 1} of {parent}, got {node.attrs['axes']!r}")
    return tuple(int(a) for a in axes)


def sources(node, graph):
    """For every output entry, the position of the parent entry it takes."""
    parent = graph.shapes[node.inputs[0]]
    return np.arange(int(np.prod(parent))).reshape(parent).transpose(check_axes(node, parent)).ravel()


class Permute(Gather):
    """Output axis ``k`` is the parent's axis ``axes[k]``: the restriction map is a permutation matrix.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("t", "permute", ["x"], {"axes": (1, 0, 2)}), [(2, 3, 4)])
    (3, 2, 4)
    """

    name = "permute"
    attrs = ("axes",)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        return tuple(parent[a] for a in check_axes(node, parent))

    def sources(self, node, graph):
        return sources(node, graph)

    def forward(self, node, graph):
        gather, moved = Gather.forward(self, node, graph), _moved(node, graph)

        def step(inputs, out, pattern, frozen):
            if not out.flags.c_contiguous:     # the rows must be viewed with the per-sample axes
                return gather(inputs, out, pattern, frozen)
            np.copyto(out.reshape(out.shape[:1] + graph.shapes[node.name]), moved(inputs[0]))
        return step

    def maps(self, node, graph):
        axes = check_axes(node, graph.shapes[node.inputs[0]])
        back = tuple(int(a) for a in np.argsort((0,) + tuple(a + 1 for a in axes)))
        shape, moved = graph.shapes[node.name], _moved(node, graph)

        def transpose(i, y, p):
            return np.ascontiguousarray(y.reshape(y.shape[:1] + shape).transpose(back)).reshape(y.shape[0], -1)
        return (lambda i, x, p: np.ascontiguousarray(moved(x)).reshape(x.shape[0], -1)), transpose


def _moved(node, graph):
    """``moved(x)``: the rows ``x`` of the parent as a strided view of shape ``(M,) + node's shape`` (a copy of it
    is the node's value: numpy's strided copy runs whole axes, about twice as fast as a gather by index)."""
    parent = graph.shapes[node.inputs[0]]
    axes = (0,) + tuple(a + 1 for a in check_axes(node, parent))
    return lambda x: x.reshape(x.shape[:1] + parent).transpose(axes)


RULE = Permute()
