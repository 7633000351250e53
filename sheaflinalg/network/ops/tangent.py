"""Smooth operations: the sheaf of a smooth node at a state is its tangent there.

A smooth node ``v`` (sigmoid, GELU, normalisation, products of branches, attention) has the residual
``r_v = x_v - f_v(x_parents)`` with ``f_v`` differentiable.  Its restriction maps at a state are the
Jacobian blocks ``J_u = df_v/dx_u`` at the parents' values ``p`` there, and its constant term (through
the ones block) is ``c_v = f_v(p) - sum_u J_u p_u``: the affine linearisation, exact at ``p``.  So
``delta_Omega`` at a state is the Jacobian of the residuals, still square and unit lower triangular.

The pattern of a smooth node (:data:`~.rule.TANGENT`) is the linearisation point itself: its parents'
values side by side, one float64 row per sample.  Every walker carries it as it carries a ReLU mask:
read off a state (the forward pass's values, or a heat step's), frozen for an assembly or a spectrum.
A frozen forward step evaluates the tangent, ``f(p) + sum_u J_u (x_u - p_u)``, and agrees with the
state where the parents' values are the point itself.

A subclass writes :meth:`Tangent.function` (the batched ``f``), :meth:`Tangent.linearise` (a
:class:`Linearisation` of a batch of points) and :meth:`OpRule.norm_bound`, with its shape rule;
the rest is written here once.

A product of two values (``mul``, ``matmul``) has no bound over every state: its Jacobian from one factor
is the other factor, which grows without limit.  Its :meth:`OpRule.norm_bound` is ``math.inf``, and
:meth:`Tangent.norm_at` gives the bound at given linearisation points instead (the step-size bounds of
heat and training read it at the states they start from: :mod:`sheaflinalg.sheaf.matrix_free.bound`).
"""

import numpy as np

from .rule import TANGENT, OpRule, entries_touched, parameterless

#: Relative distance (to the sample's largest ``|value|``, at least 1) below which two linearisation points
#: are the same: a Gauss-Newton iteration that moves its point less has converged to rounding.
SAME_POINT = 1e-12


def point_excess(new, old):
    """Per sample, how far two linearisation points (rows) are apart in units of :data:`SAME_POINT` relative
    (to the larger of 1 and the sample's largest ``|old|``): at most 1 when they are the same point.

    Examples
    --------
    >>> point_excess(np.array([[1.0, 2.0 + 4e-12]]), np.array([[1.0, 2.0]])).round(2).tolist()    # 4e-12 / (2e-12)
    [2.0]
    """
    scale = SAME_POINT * np.maximum(1.0, np.abs(old).max(axis=1, initial=0.0))
    return np.abs(new - old).max(axis=1, initial=0.0) / scale


class Linearisation:
    """The Jacobian blocks of a smooth node at a batch of points, as maps on rows (written by each op).

    Subclasses write :meth:`apply` (``J_i x``), :meth:`transpose` (``J_i^T y``) and :meth:`block`
    (one sample's ``J_i``: a 1-D diagonal, a dense matrix or a CSR matrix).
    """

    def _missing(self, method):
        raise NotImplementedError(f"{type(self).__name__} does not define {method}: a linearisation writes apply, "
                                  "transpose and block (docs/design.md, 'Adding an op')")

    def apply(self, i, x):
        self._missing("apply")

    def transpose(self, i, y):
        self._missing("transpose")

    def block(self, i, s):
        self._missing("block")


class Stacked(Linearisation):
    """The linearisations of consecutive sample blocks (``bounds``: their first rows, then the end) as one."""

    def __init__(self, bounds, parts):
        self.bounds, self.parts = list(bounds), list(parts)

    def _each(self, method, i, x):
        return np.concatenate([getattr(part, method)(i, x[lo:hi]) for part, lo, hi
                               in zip(self.parts, self.bounds[:-1], self.bounds[1:])], axis=0)

    def apply(self, i, x):
        return self._each("apply", i, x)

    def transpose(self, i, y):
        return self._each("transpose", i, y)

    def block(self, i, s):
        k = int(np.searchsorted(self.bounds, s, side="right")) - 1
        return self.parts[k].block(i, s - self.bounds[k])


class Pending:
    """Pattern rows handed to :meth:`Tangent.prepare`: linearised at the first product, then kept."""

    def __init__(self, rows):
        self.rows, self.linearisation = rows, None


class Tangent(OpRule):
    """The part of a smooth op's rule that is the same for every smooth op (see the module)."""

    pattern = TANGENT
    has_bias = True
    velocity = staticmethod(parameterless)
    work = staticmethod(entries_touched)

    def function(self, node, graph):
        """``f(inputs) -> values``: the node's value for a block of samples (a list of parent rows)."""
        self._missing("function")

    def linearise(self, node, graph, point):
        """The :class:`Linearisation` at ``point`` (a list of parent rows, ``(n_samples, parent size)``)."""
        self._missing("linearise")

    def norm_at(self, node, graph, rows):
        """Per sample, a bound on ``||J_i||_2`` of every parent at the linearisation points ``rows`` (pattern
        rows, ``(n_samples, pattern size)``): a step size can adapt to the state.  Here :meth:`OpRule.norm_bound`
        (every state's) for every sample; a rule with a cheap bound at a point writes its own."""
        return np.full(np.atleast_2d(rows).shape[0], float(self.norm_bound(node, graph)))

    def pattern_size(self, node, graph):
        return sum(graph.sizes[p] for p in node.inputs)

    def split(self, node, graph, rows):
        """The parents' rows of pattern rows (views)."""
        bounds = np.cumsum([0] + [graph.sizes[p] for p in node.inputs])
        return [rows[:, lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]

    def forward(self, node, graph):
        f = self.function(node, graph)

        def step(inputs, out, pattern, frozen):
            if not frozen:
                out[...] = f(inputs)
                np.concatenate(inputs, axis=1, out=pattern)
                return None
            point = self.split(node, graph, pattern)
            tangent = self.linearise(node, graph, point)
            out[...] = f(point)
            for i, (x, p) in enumerate(zip(inputs, point)):
                out += tangent.apply(i, x - p)
            return np.logical_and.reduce([np.all(x == p, axis=1) for x, p in zip(inputs, point)])
        return step

    def evaluated(self, node, graph):
        """``both(inputs, out) -> linearisation at inputs``: writes the value of a block of samples into ``out``
        (its rows of the node's value) and makes the tangent there in one go (a subclass whose tangent reuses
        the value's quantities, a normalisation's mean and sigma, writes its own); the linearisation may keep
        references to ``inputs``, never to ``out`` (the caller adds residuals to it)."""
        f = self.function(node, graph)

        def both(inputs, out):
            out[...] = f(inputs)
            return self.linearise(node, graph, inputs)
        return both

    def linearised_forward(self, node, graph):
        """:meth:`forward`'s step, except that reading the pattern off the inputs (not frozen) also returns
        the :class:`Linearisation` there, made with the value (:meth:`evaluated`): a forward pass whose
        tangents are wanted next (:func:`~sheaflinalg.network.graph.forward.evaluate` with ``tangents``)."""
        both, frozen_step = self.evaluated(node, graph), self.forward(node, graph)

        def step(inputs, out, pattern, frozen):
            if frozen:
                return frozen_step(inputs, out, pattern, frozen)
            tangent = both(inputs, out)
            np.concatenate(inputs, axis=1, out=pattern)
            return tangent
        return step

    def _at(self, node, graph, pattern):
        """The linearisation of pattern rows, of a :class:`Pending` (kept there) or one already made."""
        if isinstance(pattern, Linearisation):
            return pattern
        if isinstance(pattern, Pending):
            if pattern.linearisation is None:
                pattern.linearisation = self.linearise(node, graph, self.split(node, graph, pattern.rows))
            return pattern.linearisation
        return self.linearise(node, graph, self.split(node, graph, np.atleast_2d(pattern)))

    def blocks(self, node, graph, pattern=None):
        tangent = self._at(node, graph, pattern)
        return [tangent.block(i, 0) for i in range(len(node.inputs))]

    def maps(self, node, graph):
        return ((lambda i, x, p: self._at(node, graph, p).apply(i, x)),
                (lambda i, y, p: self._at(node, graph, p).transpose(i, y)))

    def prepare(self, node, pattern):
        return pattern if pattern is None or isinstance(pattern, Linearisation) else Pending(pattern)

    def bias(self, node, graph):
        return None

    def constant(self, node, graph, pattern=None):
        point = self.split(node, graph, np.atleast_2d(pattern))
        tangent = self.linearise(node, graph, point)
        c = self.function(node, graph)(point)
        for i, p in enumerate(point):
            c = c - tangent.apply(i, p)
        return c[0]

    def nnz(self, node, graph):
        n = graph.sizes[node.name]
        return n * len(node.inputs) + n, sum(graph.sizes[p] for p in node.inputs) ** 2

    def same_pattern(self, node, new, old):
        return point_excess(new, old) <= 1.0

    def read_pattern(self, node, graph, z, previous=None, rtol=1e-12):
        """The linearisation point: the parents' values ``z`` (side by side), as they are."""
        return np.array(z, dtype=np.float64)

    def check_pattern(self, node, graph, rows, what):
        """``rows`` as float64 linearisation points (finite)."""
        if rows.dtype.kind not in "iuf":
            raise ValueError(f"{what} must hold the node's linearisation point (its parents' values), got dtype "
                             f"{rows.dtype}")
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        if not np.all(np.isfinite(rows)):
            raise ValueError(f"{what}: the linearisation point must be finite")
        return rows

    def selected(self, node, graph, rows):
        raise ValueError(f"node {node.name!r} ({node.op}) is smooth: its tangent has no pieces to split")

    def split_edge(self, node):
        """None: a smooth node's edge is not split by pieces."""
        return None
