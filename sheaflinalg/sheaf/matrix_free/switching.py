"""Self-consistent activation patterns of a graph network's equilibria: pattern iteration and Filippov sliding.

An equilibrium problem on a graph network (the output pinned to the labels,
:mod:`~sheaflinalg.discord.pinning.graph`; the output nudged towards them,
:mod:`~sheaflinalg.training.equilibrium.graph`) is solved exactly for a frozen
activation pattern by a *frozen solve*: a callable
``solve(X, Y, pattern, surface=(), values=None) -> (M, n_free)`` free cochains
in ``solve.layout``'s order (``surface``: ``(node, j)`` coordinates held at 0,
one sample; ``values``: every node's value under ``pattern`` at zero residuals
when the caller has it, the forward pass at the first iteration, so that the
solve need not evaluate it again; a solve with a ``width`` attribute returns
that many columns, the free cochain first and what else it computed after it,
carried along).  This module makes the pattern agree with the solution:

- :func:`iterate_pattern`: from the forward pass's pattern, every sample whose
  solution reads another pattern is solved again under it, until it agrees
  (settled), the patterns cycle, or the cap;
- :mod:`~.filippov`: a sample whose pattern cycles may sit on switching surfaces: the Filippov search holds
  them until Filippov's condition holds (a cycle of max-pool selections alone only when the solve holds pairs
  of entries equal, or when the caller decides ties: ``tied``, small nudgings, :func:`read_pattern`, which also
  decides the rectifier coordinates whose pre-activation is exactly 0 at the forward pass by the sign of the
  response, so that they never reach the search);
- :func:`check_surfaces`: a solution may leave a mask coordinate at exactly
  ``z = 0`` under the inactive pattern (its parent's edge alone pulls it to a
  zero prediction) while the pattern read off the state, ``z >= 0`` active,
  has a force on it: both patterns agree on every value there, but only one
  is at rest.  It is an equilibrium of the nonsmooth energy only when neither
  side pushes it off the surface (``f_below >= 0 >= f_above``), a Filippov
  sliding coordinate with the convex weight at an end of ``[0, 1]``: it is
  reported as sliding, held at exactly 0; otherwise its pattern is set to the
  side it is pushed to and the sample is not settled.
"""

import numpy as np

from ...network.graph.forward import evaluate
from ...network.graph.nodes import INPUT
from ...network.ops import MASK, SELECTION
from ..patterns import graph_pattern, same_pattern

#: Relative size of a pre-activation taken as zero up to rounding (either side of a mask is consistent).
ROUNDING = 1e-12


def iterate_pattern(solve, graph, X, Y, max_iter, tied=None, damp=None, handoff=None):
    """``(state, pattern, settled, iterations)``: frozen solves from the forward pass's pattern, each unsettled
    sample taking the pattern its solution reads, until it agrees (settled), its own patterns cycle (it
    comes back to one it had) or ``max_iter`` solves.

    ``iterations`` is the number of frozen solves the slowest sample had.  With ``tied`` (:func:`forward_ties`),
    a selection keeps its entry against another that is tied with it at the forward pass (:func:`read_pattern`).
    With ``damp`` (smooth nodes: a Gauss-Newton iteration), every solve after the first is a step from the
    previous state: ``damp(X, old, new, samples)`` returns the state taken on it (a line search) and per sample
    whether the step was shortened (such a sample is not settled: a short step is no fixed point).  With
    ``handoff(old, new, samples)`` (per sample of the patterns before and after a solve, whether the search
    should take over: :class:`~.window_levels.LevelsHandoff`), a sample it marks stops as cycling does.
    """
    M = X.shape[0]
    if tied is None:
        forward = evaluate(graph, X)
        pattern, first = forward.pattern, forward.values
    else:                           # the forward pass is at hand, with its pattern (copied: changed in place below)
        pattern, first = forward_pattern(graph, tied), tied
    state = np.empty((M, getattr(solve, "width", solve.layout.n_free)))
    settled, cycling = np.zeros(M, dtype=bool), np.zeros(M, dtype=bool)
    history = [set() for _ in range(M)]
    iterations = 0
    for _ in range(max_iter):
        todo = np.flatnonzero(~settled & ~cycling)
        if todo.size == 0:
            break                   # all settled, or cycling: their equilibria are on a surface
        iterations += 1
        every = todo.size == M             # every sample: the batch's own arrays, not copies of them
        rows = dict(pattern) if every else {name: p[todo] for name, p in pattern.items()}
        solved = solve(X if every else X[todo], Y if every else Y[todo], rows,
                       values=first if iterations == 1 else None)
        short = np.zeros(todo.size, dtype=bool)
        if damp is not None and iterations > 1:
            solved, short = damp(X[todo], state[todo], solved, todo)
        if todo.size == M:
            state = solved          # every sample: no copy
        else:
            state[todo] = solved
        new = read_pattern(graph, X if every else X[todo], node_values(graph, solve.layout, solved), rows,
                           tied if tied is None or every else {name: v[todo] for name, v in tied.items()})
        same = same_pattern(graph, new, rows, todo.size) & ~short
        handed = np.zeros(todo.size, dtype=bool) if handoff is None else handoff(rows, new, todo) & ~same
        for name in graph.pattern_nodes:        # (rows may be pattern's own arrays)
            pattern[name][todo] = new[name]
        settled[todo[same]] = True
        cycling[todo[handed]] = True
        for i in np.flatnonzero(~same & ~handed):
            s = todo[i]
            key = b"".join(new[name][i].tobytes() for name in graph.pattern_nodes)
            cycling[s] = key in history[s]
            history[s].add(key)
    return state, pattern, settled, iterations


class _Ties(dict):
    """The forward values of :func:`forward_ties`, with their zero pre-activations (:func:`forward_zeros`)
    found once for the batch in ``zeros`` and the pattern the forward pass wrote as it went in ``pattern``."""


def forward_ties(graph, X):
    """``{node: (M, size)}``: every node's forward value and the input's under ``"x"``, the ``tied`` argument of
    :func:`read_pattern` (and of :func:`iterate_pattern`, :func:`~.filippov.settle_surfaces`)."""
    forward = evaluate(graph, X)
    tied = _Ties({**forward.values, INPUT: X})
    tied.zeros, tied.pattern = forward_zeros(graph, tied), forward.pattern
    return tied


def forward_pattern(graph, tied):
    """A copy of the pattern of the forward values ``tied``: the one :func:`forward_ties`' forward pass wrote
    (the same as read off its values, ``z >= 0`` active and a window's first maximum, without reading the
    windows again), or read off ``tied`` when it has none."""
    made = getattr(tied, "pattern", None)
    if made is None:
        return graph_pattern(graph, tied)
    return {name: rows.copy() for name, rows in made.items()}


def node_values(graph, layout, state):
    """``{node: view of state}``: every node's value in the free cochains ``state`` (rows are samples)."""
    return {node.name: state[:, layout.free(node.name)] for node in graph.nodes}


def mask_nodes(graph):
    """The nodes of ``graph`` whose pattern is a mask (rectifiers), in order."""
    return [node for node in graph.nodes if node.rule.pattern is MASK]


def read_pattern(graph, x, values, previous, tied=None):
    """The pattern read off a solution, keeping ``previous``'s side of every mask coordinate whose ``z`` is
    zero up to rounding (a solve leaves ``+-1e-17`` where the forward pass has an exact 0).

    ``tied``: every node's forward value (the input's under ``"x"``, rows as ``x``'s), to decide the max-pool
    windows whose selection is tied at the forward pass (:func:`_decide_ties`) and the rectifier coordinates
    whose pre-activation is 0 there (:func:`_decide_zeros`).
    """
    values = {**values, INPUT: x}
    selections = () if tied is None else [name for name in graph.pattern_nodes
                                          if graph.node(name).rule.pattern is SELECTION]
    new = graph_pattern(graph, values, previous=previous, skip=selections)
    for node in mask_nodes(graph):
        z = values[node.inputs[0]]
        rounding = np.abs(z) <= ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True))
        new[node.name] = np.where(rounding, previous[node.name], new[node.name])
    if tied is not None:
        _decide_ties(graph, values, previous, new, tied)
        _decide_zeros(graph, previous, new, tied)
    return new


def forward_zeros(graph, tied):
    """``{u: (M, n) bool}``: the coordinates of every mask node's parent ``u`` whose forward value (``tied``,
    :func:`forward_ties`) is zero up to :data:`ROUNDING`: a tie of the rectifier's two sides (found once per
    batch: :func:`forward_ties` keeps them)."""
    if getattr(tied, "zeros", None) is not None:
        return tied.zeros
    zeros = {}
    for u in {node.inputs[0] for node in mask_nodes(graph)}:
        f = tied[u]
        zeros[u] = np.abs(f) <= ROUNDING * np.maximum(1.0, np.abs(f).max(axis=1, keepdims=True))
    return zeros


def decided_slides(graph, tied, pattern, values, rows):
    """The number of rectifier coordinates of the samples ``rows`` (bool) at a forward zero (``tied``) that were
    decided inactive and moved up (:func:`_decide_zeros`: both sides push into the surface)."""
    zeros = forward_zeros(graph, tied)
    count = 0
    for node in mask_nodes(graph):
        u = node.inputs[0]
        if u == INPUT:
            continue                # the input does not move
        z = values[u]
        up = z > ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True))
        count += int(np.sum((zeros[u] & ~pattern[node.name] & up)[rows]))
    return count


def _decide_zeros(graph, previous, new, tied):
    """Deactivate (in ``new``, in place) a rectifier coordinate whose pre-activation is zero at the forward pass
    only when the solution moved it down, and never activate one there again.

    At a forward zero both sides give the forward value; the sign of the response decides.  Active (the forward
    pass's side, ``z >= 0``) and moved up, or inactive and moved down: the side is consistent.  Active and moved
    down: the coordinate turns inactive.  Inactive and moved up (the frozen solve without the coordinate's pull
    pushes it up, the one with it pushes it down): both sides push into the surface, the pattern would cycle, and
    the minimiser is the sliding mode ``z = 0``, whose gradient as the nudging goes to 0 lies between the two
    sides' gradients; the tie is decided inactive (backpropagation's ``relu'(0) = 0``), the nudged state kept,
    ``O(b)`` from the sliding mode (for small nudgings only).  The flips go one way: the iteration ends.
    """
    zeros = forward_zeros(graph, tied)
    for node in mask_nodes(graph):
        tie = zeros[node.inputs[0]]
        new[node.name] = np.where(tie, previous[node.name] & new[node.name], new[node.name])


def _decide_ties(graph, values, previous, new, tied):
    """The selections (into ``new``) read off the solution, keeping ``previous``'s where it is still a maximum up to
    rounding (:func:`~sheaflinalg.sheaf.patterns.graph_pattern`), and ``previous``'s again in every window where the
    solution moved it down from its forward value and the new maximum was tied with it at the forward pass (up
    to :data:`ROUNDING`); one compiled pass per node (the rule's ``read_decided``).

    Both selections give the forward value; the side the nudged state leaves the tie on is the sign of the
    response.  Up: the selected entry stays the largest, or another tied entry went up further and is read
    (it takes the pull next).  Down: whichever tied entry is selected moves down and another becomes the
    largest, so the selections would cycle among the tied entries: the minimiser there is the window's
    sliding mode (the tied entries moving down together), whose gradient as the nudging goes to 0 is a
    convex combination of the tied selections' gradients, the forward pass's (the first maximum,
    backpropagation's) one of them.  The tie is decided by the selection solved under, the nudged state
    kept (``O(b)`` from the sliding mode: for small nudgings only).
    """
    for name in graph.pattern_nodes:
        node = graph.node(name)
        if node.rule.pattern is SELECTION:
            u = node.inputs[0]
            new[name] = node.rule.read_decided(node, graph, values[u], tied[u], previous[name], tie_rtol=ROUNDING)


def check_surfaces(sheaf, X, values, pattern, settled, sliding, forces, rest, decided=None):
    """Classify the mask coordinates of the ``settled`` samples that are on their switching surface.

    A coordinate ``(u, j)`` of the parent ``u`` of a ``relu``/``leaky_relu`` node is on the surface when
    ``z = values[u][:, j]`` is zero up to :data:`ROUNDING` (and not already in ``sliding``); it is set to
    exactly 0 in ``values`` (in place), and its one-sided forces ``f_above`` (the pattern read off
    ``z = 0``) and ``f_below`` (:func:`~.filippov.on_switching_surface`) decide: ``f_above`` within ``rest`` of 0 (the
    read-off side at rest: an equilibrium by the ``z >= 0`` convention), nothing to report;
    ``f_below >= 0 > f_above``, appended to ``sliding``; otherwise the sample is pushed off the surface:
    ``settled`` is cleared and every mask child's pattern takes the side it is pushed to (changed in place).

    Parameters
    ----------
    sheaf : GraphSheaf
    X : ndarray, shape (M, n_in)
    values : dict
        ``{node: (M, size)}`` views of the solutions (changed in place).
    pattern : dict
        ``{node: (M, size)}``: the patterns the solutions were solved under (changed in place).
    settled : ndarray of bool, shape (M,)
        Changed in place.
    sliding : list of list
        Per sample, the held ``(node, j)`` pairs (appended to in place).
    forces : callable
        ``forces(values) -> (edges, force)``: the residuals and the force on every node (the caller's
        output treatment included: pinned, or the nudged loss's pull).
    rest : float
        Relative size of a force taken as zero (times ``1 + max |value|`` of the sample, ``X`` included).
    decided : dict, optional
        ``{u: (M, n) bool}``: coordinates left alone, their side decided as ties of the forward pass
        (:func:`forward_zeros`, :func:`read_pattern`).

    Returns
    -------
    int
        The number of coordinates reported as sliding.
    """
    if not settled.any():
        return 0
    graph = sheaf.graph
    on = _on_surface(graph, values, settled, sliding, decided)
    if not on:
        return 0
    for u, mask in on.items():
        values[u][mask] = 0.0
    edges, force = forces(values)
    tol = rest * (1.0 + np.maximum(np.max([np.abs(v).max(axis=1) for v in values.values()], axis=0),
                                   np.abs(X).max(axis=1)))[:, None]
    slides = {}
    for u, mask in on.items():
        children = [node for node in mask_nodes(graph) if node.inputs[0] == u]
        above = force[u]
        below = above - sum((1.0 - node.rule.slope(node)) * edges[node.name] for node in children)
        moving = mask & (np.abs(above) > tol)           # the read-off side (z >= 0 active) is not at rest
        slides[u] = moving & (above < 0.0) & (below >= -tol)
        pushed = moving & ~slides[u]
        for node in children:
            pattern[node.name][pushed] = (above > tol)[pushed]
        settled &= ~pushed.any(axis=1)
    found = 0
    for u, rows in slides.items():                      # a sample pushed off a surface reports none
        for s, j in zip(*np.nonzero(rows & settled[:, None])):
            sliding[s].append((u, int(j)))
            found += 1
    for held in sliding:
        held.sort()
    return found


def _on_surface(graph, values, settled, sliding, decided=None):
    """``{u: (M, n) bool}``: the coordinates of settled samples on a mask's switching surface, held ones and
    ``decided`` ones apart."""
    on = {}
    for u in {node.inputs[0] for node in mask_nodes(graph)} - {INPUT}:
        z = values[u]
        mask = np.abs(z) <= ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True))
        mask &= settled[:, None]
        if decided is not None:
            mask &= ~decided[u]
        for s in np.flatnonzero(mask.any(axis=1)):
            for held in sliding[s]:
                if len(held) == 2 and held[0] == u:
                    mask[s, held[1]] = False
        if mask.any():
            on[u] = mask
    return on


def ties_at(graph, X, values):
    """Per sample, the number of switching surfaces the state ``values`` (``{node: (M, size)}``) is on: mask
    coordinates whose parent is zero up to :data:`ROUNDING`, max-pool windows whose largest entry is tied
    with another up to :data:`ROUNDING`.  On a settled sample that holds none of them (no sliding), each is
    decided: the side read off the state is at rest (``z >= 0`` active; a window's first maximum)."""
    values = {**values, INPUT: X}
    count = np.zeros(X.shape[0], dtype=np.int64)
    for u in {node.inputs[0] for node in mask_nodes(graph)}:
        z = values[u]
        count += np.sum(np.abs(z) <= ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True)), axis=1)
    for node in (graph.node(n) for n in graph.pattern_nodes):
        if node.rule.pattern is SELECTION:
            z = values[node.inputs[0]]
            channels, n_in, index, _ = node.rule.windows(node, graph)
            pos = np.arange(channels)[:, None, None] * n_in + np.maximum(index, 0)[None]
            entries = np.where(index[None] >= 0, z[:, pos], -np.inf)              # (M, C, P, K)
            scale = ROUNDING * np.maximum(1.0, np.abs(z).max(axis=1))[:, None, None, None]
            best = entries.max(axis=3, keepdims=True)
            count += np.sum(np.sum(entries >= best - scale, axis=3) > 1, axis=(1, 2))
    return count
