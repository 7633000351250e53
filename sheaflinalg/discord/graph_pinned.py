"""The pinned equilibrium of a graph network: the output pinned to the labels, Filippov sliding on ReLU surfaces.

:func:`~sheaflinalg.complete` pins the output (the output node of the
reduced sheaf for an identity output, ``yhat`` otherwise), solves for the
activation pattern and updates it until it is consistent.  A sample whose
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

from ..network.graph.nodes import INPUT
from ..sheaf.completion import complete
from ..sheaf.graph_residuals import GraphSheaf, output_adjoint, output_residual
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
    output = graph.output_node if net.output == "identity" else "yhat"
    c = complete(net, X, pins={output: Y}, max_iter=max_iter, backend=backend)
    state = c.state.copy()
    sheaf = GraphSheaf(graph)
    settled = c.settled_samples | at_rest(sheaf, X, state, c.layout)
    sliding = [[] for _ in range(X.shape[0])]
    for s in np.flatnonzero(~settled):
        pattern = {name: rows[s:s + 1].copy() for name, rows in c.pattern.items()}
        found = _on_switching_surface(net, sheaf, X[s:s + 1], {output: Y[s:s + 1]}, pattern, max_iter, backend)
        if found is not None:
            state[s], sliding[s] = found
            settled[s] = True
    return state, c.layout, settled, sliding


def _mask_nodes(graph):
    return [node for node in graph.nodes if node.op in MASK_OPS]


def _on_switching_surface(net, sheaf, x, pins, pat, max_iter, backend):
    """``(state, [(node, j), ...])`` of a Filippov equilibrium of one sample, or None.

    Frozen-pattern solves from the sample's last pattern: a pattern that comes back (a cycle) pins the
    mask coordinates that flip in it at ``z = 0``; a consistent solution is accepted when both sides push
    into the surface at every pinned coordinate, and one that fails the condition is released to the
    side it is pushed to.
    """
    graph = net.graph
    surface, seen = set(), set()
    for _ in range(max_iter):
        for node in _mask_nodes(graph):
            # a held coordinate's side does not change the solve (its z is pinned at 0); active is the side
            # that z = 0 reads, so that a frozen solve of a nonlinear output can settle
            pat[node.name][0, [j for u, j in surface if u == node.inputs[0]]] = True
        c = complete(net, x, pins=_surface_pins(pins, surface), pattern=pat, backend=backend)
        values = {node.name: c.block(node.name) for node in graph.nodes}
        new = _read_pattern(graph, x, values, pat)
        flips = {(node.inputs[0], int(j)) for node in _mask_nodes(graph)
                 for j in np.flatnonzero(new[node.name][0] != pat[node.name][0])} - surface
        moved = any(np.any(new[n] != pat[n]) for n in graph.pattern_nodes if graph.node(n).op == "maxpool")
        if not flips and not moved:
            released = _release(graph, sheaf, x, values, surface, pat)
            if not released:
                return c.state[0], sorted(surface)
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
        rounding = np.abs(z) <= ROUNDING * max(1.0, float(np.abs(z).max()))
        new[node.name] = np.where(rounding, previous[node.name], new[node.name])
    return new


def at_rest(sheaf, X, state, layout):
    """Per sample, whether the force on every unpinned coordinate vanishes (to :data:`REST` relative) under
    the pattern read off ``state``: an equilibrium, whatever pattern the solve that found it assumed."""
    graph = sheaf.graph
    out = graph.output_node
    values = {node.name: state[:, layout.free(node.name)] for node in graph.nodes}
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
