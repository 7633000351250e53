"""``softmax``: the softmax over one per-sample axis (attribute ``axis``), optionally with a causal mask.

Every slice along ``axis`` (the other axes fixed) is normalised on its own: ``y = exp(z) / sum exp(z)``.
With ``causal=True`` (attention's ``is_causal``: ``axis`` the last axis, the rows on the one before it) the
entry ``j`` of row ``t`` is masked for ``j > t``: a fixed ``-inf`` before the softmax, so its probability
is 0 and it has no Jacobian.

The tangent of a slice is ``J = diag(y) - y y^T`` (dense per slice: a CSR block of dense slices) and the
constant is ``y - J z``.  ``J`` is symmetric, and its Gershgorin discs lie in ``[0, 2 y_i (1 - y_i)]``
(``sum_{j != i} y_i y_j = y_i (1 - y_i)``), so ``||J||_2 <= max 2 y (1 - y) <= 1/2``, over every state.
"""

import numbers

import numpy as np

from ...kernels.softmax import softmax_slices, softmax_tangent
from .rule import csr
from .tangent import Linearisation, Tangent


def check_attrs(node, parent):
    """``(axis, causal)`` checked against the parent's per-sample shape."""
    axis, causal = node.attrs["axis"], node.attrs["causal"]
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not 0 <= axis < len(parent):
        raise ValueError(f"node {node.name!r} (softmax): axis must be a per-sample axis 0..{len(parent) - 1} of "
                         f"{parent}, got {axis!r}")
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"node {node.name!r} (softmax): causal must be True or False, got {causal!r}")
    if causal and (len(parent) < 2 or axis != len(parent) - 1):
        raise ValueError(f"node {node.name!r} (softmax): a causal mask needs the last axis of a value with two "
                         f"axes or more (rows, then the entries they attend to), got axis={axis} of {parent}")
    return int(axis), bool(causal)


def slices(node, graph):
    """``(n_slices, length)``: the stalk positions of every slice along the axis."""
    shape = graph.shapes[node.name]
    axis, _ = check_attrs(node, shape)
    return np.moveaxis(np.arange(graph.sizes[node.name]).reshape(shape), axis, -1).reshape(-1, shape[axis])


def allowed(node, graph):
    """``(n_slices, length)`` bools: the entries the mask keeps (every entry without ``causal``)."""
    shape = graph.shapes[node.name]
    axis, causal = check_attrs(node, shape)
    if not causal:
        return np.ones((graph.sizes[node.name] // shape[axis], shape[axis]), dtype=bool)
    rows, length = shape[-2], shape[-1]
    keep = np.arange(length)[None, :] <= np.arange(rows)[:, None]
    return np.broadcast_to(keep, shape[:-2] + (rows, length)).reshape(-1, length)


def probabilities(node, graph, z, out=None):
    """``(n_samples, n_slices, length)``: the softmax of every slice of the rows ``z``, written into the rows
    ``out`` too (their stalk positions) if given; one compiled pass (numpy's expressions to rounding)."""
    return _softmax(z, slices(node, graph), np.ascontiguousarray(allowed(node, graph)), out)


def _softmax(z, positions, keep, out=None):
    """:func:`probabilities` with the slices' ``positions`` and the mask ``keep`` made before."""
    y = np.empty((z.shape[0],) + positions.shape)
    softmax_slices(np.asarray(z, dtype=np.float64), positions, keep, y, np.empty(z.shape) if out is None else out)
    return y


class SliceTangent(Linearisation):
    """``diag(y) - y y^T`` of every slice (symmetric: its own transpose)."""

    def __init__(self, y, positions):
        self.y, self.positions = y, positions

    def apply(self, i, x):
        out = np.empty(x.shape)
        softmax_tangent(self.y, self.positions, np.asarray(x, dtype=np.float64), out)
        return out

    transpose = apply

    def block(self, i, s):
        y, pos = self.y[s], self.positions
        dense = y[:, :, None] * (np.eye(pos.shape[1]) - y[:, None, :])
        n = pos.size
        out = csr(np.broadcast_to(pos[:, :, None], dense.shape), np.broadcast_to(pos[:, None, :], dense.shape),
                  dense, (n, n))
        out.eliminate_zeros()
        return out


class Softmax(Tangent):
    """``softmax`` over ``axis`` of every slice (see the module); norm bound 1/2.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.from_nodes((2, 2), [sl.Node("p", "softmax", ["x"], {"axis": 1, "causal": True})])
    >>> net.forward(np.array([[0.0, 5.0, 0.0, 0.0]]))
    array([[1. , 0. , 0.5, 0.5]])
    """

    name = "softmax"
    attrs = ("axis", "causal")

    def shape(self, node, parent_shapes):
        check_attrs(node, parent_shapes[0])
        return parent_shapes[0]

    def function(self, node, graph):
        def f(inputs):
            out = np.empty(inputs[0].shape)
            probabilities(node, graph, inputs[0], out)
            return out
        return f

    def linearise(self, node, graph, point):
        return SliceTangent(probabilities(node, graph, point[0]), slices(node, graph))

    def evaluated(self, node, graph):
        positions, keep = slices(node, graph), np.ascontiguousarray(allowed(node, graph))

        def both(inputs, out):      # the probabilities once, for the value and the tangent
            return SliceTangent(_softmax(inputs[0], positions, keep, out), positions)
        return both

    def norm_bound(self, node, graph):
        return 0.5

    def nnz(self, node, graph):
        n = graph.sizes[node.name]
        length = graph.shapes[node.name][node.attrs["axis"]]
        return n * length + n, n * length

    def work(self, node, graph):
        return 6 * graph.sizes[node.name]


RULE = Softmax()
