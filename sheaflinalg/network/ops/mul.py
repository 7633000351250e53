"""``mul``: the elementwise product of two parents, their per-sample shapes broadcast as numpy does.

Squeeze-and-excitation gates ``(C, 1, 1) * (C, H, W)``, SiLU written as ``x * sigmoid(x)``, GLU-style gates
of equal shapes.  With ``a`` and ``b`` read at every output entry (``a[i]``, ``b[i]``: the entry it
broadcasts from), ``f(a, b)[i] = a[i] b[i]`` and the tangent at ``(a, b)`` is

- ``J_a``: output entry ``i`` takes the ``a`` entry it reads with the weight ``b[i]`` (``diag(b)`` when
  ``a`` is not broadcast), and ``J_b`` likewise with the weights ``a[i]`` (a sum over the broadcast axes);
- the constant ``f(p) - J_a a - J_b b = -a b``.

Every output row of ``J_a`` has one entry, so its columns have disjoint supports, ``J_a^T J_a`` is
diagonal and ``||J_a||_2`` is its largest column norm: ``max |b|`` without broadcasting, the largest
``||b||`` over the entries one ``a`` entry is multiplied with when broadcast.  No bound holds for every
state (it grows with the other factor): :meth:`Mul.norm_bound` is ``math.inf`` and :meth:`Mul.norm_at`
gives this exact norm at given points.
"""

import functools
import math

import numpy as np

from .rule import csr
from .tangent import Linearisation, Tangent


def broadcast_shape(node, parent_shapes):
    """The broadcast per-sample shape of the parents; ValueError naming the node if they do not broadcast."""
    try:
        return tuple(int(n) for n in np.broadcast_shapes(*parent_shapes))
    except ValueError:
        raise ValueError(f"node {node.name!r} ({node.op}): its parents {list(node.inputs)} have shapes "
                         f"{parent_shapes}, which do not broadcast (every axis equal, or 1 in one of them)") from None


def sources(node, graph):
    """For each parent, the position in its stalk of the entry every output entry reads."""
    return list(_geometry(graph.shapes[node.name], tuple(graph.shapes[p] for p in node.inputs))[0])


@functools.lru_cache(maxsize=256)
def _geometry(out, parent_shapes):
    """``(index, scatter)`` of parents of these shapes broadcast to ``out``: the entry every output entry
    reads, and the 0/1 matrix summing output entries onto them (None for a parent read once per entry:
    its transpose is the identity).  Shapes only: made once for every linearisation."""
    index = tuple(np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), out).ravel() for shape in parent_shapes)
    scatter = tuple(None if ix.size == math.prod(shape) else
                    csr(np.arange(ix.size), ix, np.ones(ix.size), (ix.size, math.prod(shape))).T.tocsr()
                    for ix, shape in zip(index, parent_shapes))
    return index, scatter


class Scaled(Linearisation):
    """Maps whose output entry ``i`` takes parent ``k``'s entry ``index[k][i]`` times ``weights[k][:, i]``."""

    def __init__(self, index, weights, sizes, scatter=None):
        self.index, self.weights, self.sizes = index, weights, sizes
        self.scatter = [csr(np.arange(ix.size), ix, np.ones(ix.size), (ix.size, n)).T.tocsr()
                        for ix, n in zip(index, sizes)] if scatter is None else scatter

    def apply(self, i, x):
        return x[:, self.index[i]] * self.weights[i]

    def transpose(self, i, y):
        if self.scatter[i] is None:         # read once per entry, in order: the identity
            return y * self.weights[i]
        return np.asarray(self.scatter[i] @ (y * self.weights[i]).T).T

    def block(self, i, s):
        ix = self.index[i]
        return csr(np.arange(ix.size), ix, self.weights[i][s], (ix.size, self.sizes[i]))

    def column_norms(self, i):
        """``(n_samples, parent size)``: the 2-norm of every column of ``J_i`` (its columns are disjoint)."""
        if self.scatter[i] is None:
            return np.abs(self.weights[i])
        return np.sqrt(np.asarray(self.scatter[i] @ (self.weights[i] ** 2).T).T)


class Mul(Tangent):
    """``x_v = a * b`` entry by entry (numpy broadcasting of the per-sample shapes); see the module.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> a = sl.Node("g", "reshape", ["x"], {"shape": (2, 1)})
    >>> net = sl.Network.from_nodes((2,), [a, sl.Node("m", "mul", ["g", "x"])])
    >>> net.graph.shapes["m"]
    (2, 2)
    >>> net.forward(np.array([[2.0, 3.0]]))
    array([[4., 6., 6., 9.]])
    """

    name = "mul"
    min_inputs = max_inputs = 2
    state_bound = True

    def shape(self, node, parent_shapes):
        return broadcast_shape(node, parent_shapes)

    def function(self, node, graph):
        ia, ib = sources(node, graph)
        return lambda inputs: inputs[0][:, ia] * inputs[1][:, ib]

    def linearise(self, node, graph, point):
        (ia, ib), scatter = _geometry(graph.shapes[node.name], tuple(graph.shapes[p] for p in node.inputs))
        a, b = point
        return Scaled([ia, ib], [b[:, ib], a[:, ia]], [graph.sizes[p] for p in node.inputs], list(scatter))

    def norm_bound(self, node, graph):
        return math.inf

    def norm_at(self, node, graph, rows):
        a, b = self.split(node, graph, np.atleast_2d(rows))
        if a.shape[1] == b.shape[1] == graph.sizes[node.name]:         # no broadcasting: diag(b), diag(a)
            return np.maximum(np.abs(a).max(axis=1, initial=0.0), np.abs(b).max(axis=1, initial=0.0))
        tangent = self.linearise(node, graph, [a, b])
        return np.max([tangent.column_norms(i).max(axis=1, initial=0.0) for i in range(2)], axis=0)

    def nnz(self, node, graph):
        n = graph.sizes[node.name]
        return 3 * n, 4 * n        # every output entry reads one entry of each factor: 2^2 pairs a row

    def work(self, node, graph):
        return 3 * graph.sizes[node.name]


RULE = Mul()
