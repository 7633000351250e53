"""``concat``: two or more parents joined along one per-sample axis (DenseNet, Inception, U-Net skips)."""

import numbers

import numpy as np

from .rule import MANY, Placement, csr


def positions(node, graph):
    """For each parent, the positions of its entries in the concatenation's stalk."""
    axis = node.attrs["axis"]
    at = np.arange(graph.sizes[node.name]).reshape(graph.shapes[node.name])
    bounds = np.cumsum([0] + [graph.shapes[p][axis] for p in node.inputs])
    return [np.take(at, np.arange(lo, hi), axis=axis).ravel() for lo, hi in zip(bounds[:-1], bounds[1:])]


class Concat(Placement):
    """Every parent's restriction map places its stalk into the concatenation's rows (a selection).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("c", "concat", ["x", "x"], {"axis": 0}), [(2, 3), (2, 3)])
    (4, 3)
    """

    name = "concat"
    attrs = ("axis",)
    min_inputs, max_inputs = 2, MANY

    def shape(self, node, parent_shapes):
        axis, ndim = node.attrs["axis"], len(parent_shapes[0])
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not 0 <= axis < ndim:
            raise ValueError(f"node {node.name!r} (concat): axis must be a per-sample axis in 0..{ndim - 1}, "
                             f"got {axis!r}")
        rest = [p[:axis] + p[axis + 1:] for p in parent_shapes]
        if any(len(p) != ndim for p in parent_shapes) or any(r != rest[0] for r in rest):
            raise ValueError(f"node {node.name!r} (concat): parents {list(node.inputs)} of shapes {parent_shapes} "
                             f"differ outside axis {axis}")
        return parent_shapes[0][:axis] + (sum(p[axis] for p in parent_shapes),) + parent_shapes[0][axis + 1:]

    def forward(self, node, graph):
        axis = node.attrs["axis"]
        shapes = [graph.shapes[p] for p in node.inputs]

        def step(inputs, out, pattern, frozen):
            M = inputs[0].shape[0]
            parts = [x.reshape((M,) + shape) for x, shape in zip(inputs, shapes)]
            np.concatenate(parts, axis=axis + 1, out=out.reshape((M,) + graph.shapes[node.name]))
        return step

    def blocks(self, node, graph, pattern=None):
        n = graph.sizes[node.name]
        return [csr(rows, np.arange(rows.size), np.ones(rows.size), (n, rows.size))
                for rows in positions(node, graph)]

    def maps(self, node, graph):
        parts, size = positions(node, graph), graph.sizes[node.name]

        def place(i, x, p):
            out = np.zeros((x.shape[0], size))
            out[:, parts[i]] = x
            return out
        return place, (lambda i, y, p: y[:, parts[i]])


RULE = Concat()
