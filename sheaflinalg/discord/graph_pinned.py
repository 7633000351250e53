"""The pinned equilibrium of a graph network: the output pinned to the labels, Filippov sliding on ReLU surfaces.

The output is pinned (the output node of the reduced sheaf for an identity
output, ``yhat`` otherwise), the discord is minimised for a frozen activation
pattern, and the pattern is updated from the solution until it is
consistent.  For an identity output the frozen-pattern solve is matrix-free:
with ``k`` coordinates held (the outputs, and the switching-surface
coordinates below), the minimiser is ``w = w0 + G lam`` where ``w0`` is the
forward pass under the pattern (the unpinned minimiser), the columns of
``G = L^{-1} E`` are one backward and one forward substitution each
(``L^{-1} = delta^{-1} delta^{-T}``, :class:`~sheaflinalg.sheaf.matrix_free.GraphCoboundary`)
and ``lam`` solves the ``k x k`` system ``(E^T G) lam = y - E^T w0`` (the
Lagrange conditions of the held coordinates ``E^T w = y``).  A nonlinear
output re-linearises ``phi`` (Gauss-Newton) in :func:`~sheaflinalg.complete`.  A sample whose
pattern cycles may sit on a switching surface ``z_j = 0`` of a ``relu`` or
``leaky_relu`` node (``z`` its parent's value): there the force on ``z_j``
with the coordinate active is ``f_above``, and with it inactive
``f_below = f_above - (1 - slope) e_j`` (``e`` the node's edge discrepancy,
``slope`` 0 for a ReLU); the coordinate slides when ``f_below >= 0`` and
``f_above <= 0`` (both sides push into the surface).  As for chains
(:mod:`~sheaflinalg.discord.pinned_analysis`) the Filippov equilibrium is
found by frozen-pattern solves with those coordinates pinned at 0.  A cycle
of max-pool selections alone (ties between window entries) is not resolved:
the sample is reported as not settled.
"""

import numpy as np

from ..network.graph.forward import evaluate
from ..network.graph.nodes import INPUT
from ..sheaf.completion import complete
from ..sheaf.graph_residuals import GraphSheaf, output_adjoint, output_residual
from ..sheaf.layout import Layout
from ..sheaf.matrix_free import GraphCoboundary
from ..sheaf.patterns import graph_pattern

MASK_OPS = ("relu", "leaky_relu")
#: Relative size of a pre-activation taken as zero up to rounding (either side of a mask is consistent).
ROUNDING = 1e-12
#: Relative size of the force below which a state is an equilibrium.
REST = 1e-10


def pinned_equilibrium(net, X, Y, max_iter, backend):
    """``(state, layout, settled, sliding)`` of the output pinned to ``Y`` (validated, flat ``X`` and ``Y``).

    ``sliding[s]`` lists the ``(node, coordinate)`` pairs of sample ``s`` held at 0: the parents of
    ``relu``/``leaky_relu`` nodes whose equilibrium is on the switching surface.
    """
    graph = net.graph
    sheaf = GraphSheaf(graph)
    if net.output == "identity":
        solver = _MatrixFree(graph, sheaf.maps)
        state, pattern, settled = _iterate(solver, graph, X, Y, max_iter)
    else:
        solver = _Completion(net, backend)
        c = complete(net, X, pins={"yhat": Y}, max_iter=max_iter, backend=backend)
        state, pattern, settled = c.state.copy(), c.pattern, c.settled_samples.copy()
    layout = solver.layout
    settled |= at_rest(sheaf, X, state, layout)
    sliding = [[] for _ in range(X.shape[0])]
    for s in np.flatnonzero(~settled):
        rows = {name: p[s:s + 1].copy() for name, p in pattern.items()}
        found = _on_switching_surface(solver, sheaf, X[s:s + 1], Y[s:s + 1], rows, max_iter)
        if found is not None:
            state[s], sliding[s] = found
            settled[s] = True
    return state, layout, settled, sliding


class _MatrixFree:
    """Frozen-pattern pinned solves of an identity output without a matrix (see the module docstring)."""

    #: Rows (samples x held coordinates) per block of ``G``: one substitution pass solves them all.
    BLOCK = 4096

    def __init__(self, graph, maps):
        self.graph, self.maps = graph, maps
        self.layout = Layout.from_graph(graph, reduced=True)
        out = self.layout.free(graph.output_node)
        self.output = np.arange(out.start, out.stop)

    def __call__(self, X, Y, pattern, surface=()):
        """Free cochains minimising the discord under ``pattern`` with the output at ``Y`` and every
        ``(node, j)`` of ``surface`` at 0 (one sample when ``surface`` is given)."""
        index = np.concatenate([self.output, [self.layout.free(u).start + j for u, j in surface]]).astype(np.int64)
        k = index.size
        targets = np.concatenate([Y, np.zeros((Y.shape[0], len(surface)))], axis=1)
        values = evaluate(self.graph, X, pattern).values
        w = np.concatenate([values[node.name] for node in self.graph.nodes], axis=1)
        step = max(1, self.BLOCK // k)
        for lo in range(0, X.shape[0], step):
            rows = slice(lo, lo + step)
            b = w[rows].shape[0]
            # column i of sample m is row m * k + i, under sample m's pattern
            op = GraphCoboundary(self.graph, {name: np.repeat(p[rows], k, axis=0) for name, p in pattern.items()},
                                 maps=self.maps)
            unit = np.zeros((b * k, self.layout.n_free))
            unit[np.arange(b * k), np.tile(index, b)] = 1.0
            G = op.solve(op.solve_transpose(unit)).reshape(b, k, -1)
            lam = np.linalg.solve(G[:, :, index].transpose(0, 2, 1), (targets[rows] - w[rows][:, index])[..., None])
            w[rows] += np.einsum("mkn,mk->mn", G, lam[..., 0])
        w[:, index] = targets
        return w


class _Completion:
    """Frozen-pattern pinned solves of a nonlinear output: :func:`~sheaflinalg.complete` with ``yhat`` pinned."""

    def __init__(self, net, backend):
        self.net, self.backend = net, backend
        self.layout = Layout.from_graph(net.graph, reduced=False)

    def __call__(self, X, Y, pattern, surface=()):
        return complete(self.net, X, pins=_surface_pins({"yhat": Y}, surface), pattern=pattern,
                        backend=self.backend).state


def _iterate(solve, graph, X, Y, max_iter):
    """``(state, pattern, settled)``: frozen-pattern solves from the forward pass's pattern, each unsettled
    sample taking the pattern its solution reads, until it agrees (settled), cycles or ``max_iter``."""
    M = X.shape[0]
    pattern = evaluate(graph, X).pattern
    state = np.empty((M, solve.layout.n_free))
    settled = np.zeros(M, dtype=bool)
    history = []
    for _ in range(max_iter):
        todo = np.flatnonzero(~settled)
        rows = {name: p[todo] for name, p in pattern.items()}
        state[todo] = solve(X[todo], Y[todo], rows)
        new = _read_pattern(graph, X[todo], _node_values(graph, solve.layout, state[todo]), rows)
        same = np.ones(todo.size, dtype=bool)
        for name in graph.pattern_nodes:
            same &= np.all(new[name] == rows[name], axis=1)
            pattern[name][todo] = new[name]
        settled[todo[same]] = True
        key = b"".join(np.ascontiguousarray(new[name][~same]).tobytes() for name in graph.pattern_nodes)
        if settled.all() or key in history[-2:]:
            break                   # all settled, or the pattern cycles: the equilibrium is on a surface
        history.append(key)
    return state, pattern, settled


def _node_values(graph, layout, state):
    return {node.name: state[:, layout.free(node.name)] for node in graph.nodes}


def _mask_nodes(graph):
    return [node for node in graph.nodes if node.op in MASK_OPS]


def _on_switching_surface(solve, sheaf, x, y, pat, max_iter):
    """``(state, [(node, j), ...])`` of a Filippov equilibrium of one sample, or None.

    Frozen-pattern solves from the sample's last pattern: a pattern that comes back (a cycle) pins the
    mask coordinates that flip in it at ``z = 0``; a consistent solution is accepted when both sides push
    into the surface at every pinned coordinate, and one that fails the condition is released to the
    side it is pushed to.
    """
    graph = sheaf.graph
    surface, seen = set(), set()
    for _ in range(max_iter):
        for node in _mask_nodes(graph):
            # a held coordinate's side does not change the solve (its z is pinned at 0); active is the side
            # that z = 0 reads, so that a frozen solve of a nonlinear output can settle
            pat[node.name][0, [j for u, j in surface if u == node.inputs[0]]] = True
        state = solve(x, y, pat, sorted(surface))
        values = _node_values(graph, solve.layout, state)
        new = _read_pattern(graph, x, values, pat)
        flips = {(node.inputs[0], int(j)) for node in _mask_nodes(graph)
                 for j in np.flatnonzero(new[node.name][0] != pat[node.name][0])} - surface
        moved = any(np.any(new[n] != pat[n]) for n in graph.pattern_nodes if graph.node(n).op == "maxpool")
        if not flips and not moved:
            released = _release(graph, sheaf, x, values, surface, pat)
            if not released:
                return state[0], sorted(surface)
            surface -= released
            continue
        key = (b"".join(pat[n].tobytes() for n in graph.pattern_nodes), frozenset(surface))
        if key in seen:
            if not flips:
                return None         # max-pool selections cycle: not a ReLU switching surface
            surface |= flips        # the pattern cycles: the flipping coordinates slide
            continue
        seen.add(key)
        pat = {name: np.array(rows) for name, rows in new.items()}
    return None


def _read_pattern(graph, x, values, previous):
    """The pattern read off a solution, keeping ``previous``'s side of every mask coordinate whose ``z`` is
    zero up to rounding (a solve leaves ``+-1e-17`` where the forward pass has an exact 0)."""
    values = {**values, INPUT: x}
    new = graph_pattern(graph, values, previous=previous)
    for node in _mask_nodes(graph):
        z = values[node.inputs[0]]
        rounding = np.abs(z) <= ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True))
        new[node.name] = np.where(rounding, previous[node.name], new[node.name])
    return new


def at_rest(sheaf, X, state, layout):
    """Per sample, whether the force on every unpinned coordinate vanishes (to :data:`REST` relative) under
    the pattern read off ``state``: an equilibrium, whatever pattern the solve that found it assumed."""
    graph = sheaf.graph
    out = graph.output_node
    values = _node_values(graph, layout, state)
    force = sheaf.force(sheaf.residuals(X, values))
    if layout.reduced:
        force[out] = np.zeros_like(force[out])          # the pinned output
    else:                                                 # yhat is pinned; its edge pulls on z_out
        z = values[out]
        force[out] = force[out] + output_adjoint(graph.output, z, output_residual(graph.output, z,
                                                                                  state[:, layout.free("yhat")]))
    largest = np.max([np.abs(f).max(axis=1) for f in force.values()], axis=0)
    scale = 1.0 + np.maximum(np.abs(state).max(axis=1), np.abs(X).max(axis=1))
    return largest <= REST * scale


def _surface_pins(pins, surface):
    """The output pin and ``z_j = 0`` on every surface coordinate, as :func:`~sheaflinalg.complete` pins."""
    out = dict(pins)
    for u in sorted({u for u, _ in surface}):
        idx = sorted(j for v, j in surface if v == u)
        out[f"{u}[{','.join(map(str, idx))}]"] = np.zeros((1, len(idx)))
    return out


def _release(graph, sheaf, x, values, surface, pat):
    """Surface coordinates where Filippov's condition fails, set in ``pat`` to the side they are pushed to."""
    res = sheaf.residuals(x, values)          # at z_j = 0 the read-off mask is active: the force is f_above
    force = sheaf.force(res)
    released = set()
    for u, j in surface:
        children = [node for node in _mask_nodes(graph) if node.inputs[0] == u]
        above = force[u][0, j]
        below = above - sum((1.0 - node.attrs.get("negative_slope", 0.0)) * res.edges[node.name][0, j]
                            for node in children)
        if not (below >= 0.0 and above <= 0.0):
            released.add((u, j))
            for node in children:
                pat[node.name][0, j] = above > 0.0
    return released
