"""State-adaptive Euler steps on graph networks whose maps' norms depend on the state.

A product of two values (``mul``, ``matmul``) has no bound on its map over every state, and a
normalisation's (``1/sqrt(eps)``) is far above its bound at a typical state (``1/sigma``): their rules
set ``state_bound`` and write ``norm_at`` (:mod:`sheaflinalg.network.ops.tangent`).  On a graph with such
nodes forward Euler (with ``check_stability``) reads the step bound at every step's state:

``b_k = ||I + (n_vu(x_k))||_2^2 + max gamma + lambda``

where ``n_vu(x_k)`` is the node's ``norm_at`` at its linearisation point in ``x_k`` (the largest over the
batch) for the state-dependent nodes and the bound of every state for the others
(:func:`~sheaflinalg.sheaf.matrix_free.bound.block_norms`).  ``b_k`` bounds ``lambda_max`` of the
linearised (Gauss-Newton) operator ``delta(x_k)^T delta(x_k)`` at ``x_k``, the operator the step
``x_{k+1} = x_k - alpha dt_k delta(x_k)^T r(x_k)`` multiplies with, so ``alpha dt_k b_k < 2`` is the
fixed-step criterion read at the state the step leaves.  It is read at *every* step, never reused: no
margin is needed for the states between two reads (there are none).  It costs ``norm_at`` (one pass over
the node's values) per state-dependent node and one SVD of a matrix of one row per node: about a tenth
of a step on benchmarks/adaptive_heat.py (a gated pre-norm block: 150 against 132 ms a step), less than
the per-op drift bounds a read every ``k`` steps would need to stay sound (docs/graph-networks.md).

With ``adaptive=True`` (the default there) an unstable ``dt`` is halved until ``alpha dt_k b_k < 2``:
``dt_k = dt / 2^j``, exact in floating point, ``j`` the smallest that fits; the next step starts again
from the user's ``dt``.  With ``adaptive=False`` the run refuses at the first unstable step, naming the
state-dependent nodes with the largest norms there.  A graph without state-dependent nodes runs the
fixed step, checked once (today's path, untouched).
"""

import math

import numpy as np

from ...network.graph.nodes import INPUT
from ...sheaf.matrix_free.bound import block_norms, state_dependent_nodes


class StepControl:
    """The per-step bound of a graph's state-dependent nodes and the steps taken (see the module).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.eye(3), "bias": np.zeros(3)})
    >>> ln = sl.Node("ln", "layernorm", ["fc"], {"n_axes": 1, "eps": 1e-5})
    >>> net = sl.Network.from_nodes((3,), [fc, ln])
    >>> control = StepControl(net.graph, alpha=1.0, dt=0.5, shift=0.0, halve=True)
    >>> norms = control.norms({"ln": np.zeros((1, 3))})          # variance 0: 1/sqrt(eps)
    >>> round(float(norms[0]), 3), control.factor(0, norms)      # dt / 2^15
    (316.228, 3.0517578125e-05)
    >>> control.factor(1, control.norms({"ln": np.array([[1.0, 2.0, 3.0]])}))  # sigma ~ 0.82: stable
    1.0
    >>> control.dts
    [1.52587890625e-05, 0.5]
    """

    def __init__(self, graph, alpha, dt, shift, halve):
        self.graph, self.alpha, self.dt, self.shift, self.halve = graph, alpha, dt, shift, halve
        self.nodes = [graph.node(name) for name in state_dependent_nodes(graph)]
        self.M0 = block_norms(graph, norms={node.name: 0.0 for node in self.nodes})
        at = {node.name: i for i, node in enumerate(graph.nodes)}
        self.cells = [(at[node.name], [at[p] for p in node.inputs if p != INPUT]) for node in self.nodes]
        self.dts, self.bounds = [], []

    def norms(self, pattern):
        """The largest ``norm_at`` over the samples of ``pattern`` (``{node: linearisation points}``), one per
        state-dependent node."""
        return np.array([float(n.rule.norm_at(n, self.graph, pattern[n.name]).max(initial=0.0))
                         for n in self.nodes])

    def bound(self, norms):
        """``b_k`` (the module) with the state-dependent nodes' norms ``norms``."""
        M = self.M0.copy()
        for (row, cols), n in zip(self.cells, norms):
            for col in cols:
                M[row, col] += n
        return float(np.linalg.norm(M, 2)) ** 2 + self.shift

    def factor(self, step, norms):
        """``dt_k / dt`` (a power of two) for step ``step`` at a state of these ``norms``; records ``dt_k`` and
        ``b_k``, or refuses (``halve`` False, or a bound that is not finite)."""
        bound = self.bound(norms)
        if not math.isfinite(bound):
            raise self.refusal(step, norms, bound, "the bound there is not finite")
        j = 0
        while self.alpha * math.ldexp(self.dt, -j) * bound >= 2.0:
            if not self.halve:
                raise self.refusal(step, norms, bound, "pass adaptive=True to halve the step where it must be")
            j += 1
        self.dts.append(math.ldexp(self.dt, -j))
        self.bounds.append(bound)
        return math.ldexp(1.0, -j)

    def refusal(self, step, norms, bound, way_out):
        """The ValueError of an unstable step: the step, the bound, the nodes of the largest norms."""
        order = np.argsort(-np.asarray(norms), kind="stable")[:3]
        named = ", ".join(f"{self.nodes[i].name!r} ({self.nodes[i].op}, ||F|| <= {norms[i]:.4g})" for i in order)
        largest = 2.0 / (self.alpha * bound) if bound > 0 else math.inf
        return ValueError(
            f"dt={self.dt:g} is unstable for explicit Euler at the state of step {step}: there "
            f"lambda_max(L[Omega,Omega]) <= {bound:.6g} (largest stable dt {largest:.6g}); the maps of "
            f"node(s) {named} depend on the state; {way_out}, or a smaller dt")


def step_control(problem, settings):
    """The :class:`StepControl` of a run, or None where the step is fixed (no state-dependent node, or
    ``check_stability=False``)."""
    graph = problem.net.graph
    if not settings.check_stability or not state_dependent_nodes(graph):
        return None
    shift = (float(problem.soft.gamma.max()) if problem.soft.size else 0.0) + problem.lam
    return StepControl(graph, problem.settings.alpha, settings.dt, shift, settings.adaptive is not False)
