"""The reductions over some per-sample axes, ``mean`` and ``sum``: one base class, the weight of every entry
(``1 / count`` or 1) the only difference."""

import numbers

import numpy as np

from .rule import OpRule, csr, entries_touched, parameterless


def check_axes(node, parent):
    """``node.attrs['axes']`` as a sorted tuple of distinct per-sample axes, and ``keepdim`` checked."""
    axes = node.attrs["axes"]
    axes = (axes,) if isinstance(axes, numbers.Integral) else tuple(axes)
    if not axes or not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) and 0 <= a < len(parent)
                           for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"node {node.name!r} ({node.op}): axes must be distinct per-sample axes in "
                         f"0..{len(parent) - 1} of {parent}, got {node.attrs['axes']!r}")
    if not isinstance(node.attrs["keepdim"], (bool, np.bool_)):
        raise ValueError(f"node {node.name!r} ({node.op}): keepdim must be a bool, got {node.attrs['keepdim']!r}")
    if len(axes) == len(parent) and not node.attrs["keepdim"]:
        raise ValueError(f"node {node.name!r} ({node.op}): averaging every per-sample axis of {parent} without keepdim "
                         "leaves no per-sample axis; use keepdim=True")
    return tuple(sorted(int(a) for a in axes))


def groups(node, graph):
    """For every parent entry, the output entry it goes into; and the count of entries in every output."""
    parent = graph.shapes[node.inputs[0]]
    axes = check_axes(node, parent)
    kept = tuple(1 if a in axes else n for a, n in enumerate(parent))
    group = np.broadcast_to(np.arange(int(np.prod(kept))).reshape(kept), parent).ravel()
    return group, int(np.prod([parent[a] for a in axes]))


class Reduction(OpRule):
    """Every output is a weighted sum of a disjoint group of ``count`` parent entries, all of weight
    :meth:`weight`: ``F F^T = count * weight^2 I``, so ``||F||_2 = sqrt(count) * weight`` exactly."""

    attrs = ("axes", "keepdim")
    velocity = staticmethod(parameterless)
    work = staticmethod(entries_touched)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        axes = check_axes(node, parent)
        if node.attrs["keepdim"]:
            return tuple(1 if a in axes else n for a, n in enumerate(parent))
        return tuple(n for a, n in enumerate(parent) if a not in axes)

    def weight(self, count):
        """The weight of every entry in a group of ``count``."""
        self._missing("weight")

    def forward(self, node, graph):
        parent = graph.shapes[node.inputs[0]]
        axes = tuple(a + 1 for a in check_axes(node, parent))
        weight = self.weight(groups(node, graph)[1])

        def step(inputs, out, pattern, frozen):
            x = inputs[0]
            out[...] = x.reshape((x.shape[0],) + parent).sum(axis=axes).reshape(out.shape) * weight
        return step

    def blocks(self, node, graph, pattern=None):
        group, count = groups(node, graph)
        return [csr(group, np.arange(group.size), np.full(group.size, self.weight(count)),
                    (graph.sizes[node.name], group.size))]

    def maps(self, node, graph):
        apply, (group, count) = self.forward(node, graph), groups(node, graph)

        def reduce(i, x, p):
            out = np.empty((x.shape[0], graph.sizes[node.name]))
            apply([x], out, None, False)
            return out
        return reduce, (lambda i, y, p: y[:, group] * self.weight(count))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        """Exact: ``F F^T = count * weight^2 I`` (disjoint groups of ``count`` entries)."""
        count = groups(node, graph)[1]
        return float(np.sqrt(count) * self.weight(count))

    def nnz(self, node, graph):
        n_in = graph.sizes[node.inputs[0]]
        return n_in, n_in * groups(node, graph)[1]

