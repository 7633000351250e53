"""The Filippov search: a sample whose pattern cycles, held on its switching surfaces until Filippov's condition holds.

A sample whose pattern iteration (:func:`~.switching.iterate_pattern`) cycles
may sit on a switching surface ``z_j = 0`` of a ``relu``/``leaky_relu`` node
(``z`` its parent's value).  There the force on ``z_j`` with the coordinate
active is ``f_above``, and with it inactive ``f_below = f_above - (1 - slope)
e_j`` (``e`` the node's edge discrepancy, ``slope`` 0 for a ReLU); the
coordinate slides when ``f_below >= 0`` and ``f_above <= 0`` (both sides push
into the surface), and the Filippov equilibrium is a frozen solve (the
protocol of :mod:`~.switching`) with those coordinates held at 0.  A cycle of
max-pool selections alone (ties between window entries) is searched only when
the solve holds pairs of entries equal (its ``holds_pairs``: the levels of
windows over dead ReLUs, :mod:`~.window_levels`; Filippov's condition on a group
of tied entries, :mod:`~.window_ties`); otherwise the sample is reported as not
settled.  A cycle of clamp pieces is treated the same way.

- :func:`settle_surfaces`: the surface check of the settled samples and the search of the others;
- :func:`on_switching_surface`: the search of one sample (:class:`_Search`).
"""

import numpy as np

from ...network.ops import MASK, SELECTION
from ..patterns import same_pattern
from .switching import ROUNDING, check_surfaces, forward_zeros, mask_nodes, node_values, read_pattern
from .window_levels import WindowLevels
from .window_ties import independent, release_ties, tie_forest, tie_root, window_positions

#: Filippov searches of a sample whose equilibrium the surface check pushed off a surface (:func:`settle_surfaces`).
SEARCHES = 3
#: Whether the Filippov search holds the levels of max-pool windows over dead ReLUs read off each solve
#: (:mod:`~.window_levels`) instead of finding their ties one cycle at a time.
LEVELS = True


def settle_surfaces(solve, sheaf, X, Y, state, pattern, settled, forces, rest, max_iter, tied=None):
    """``sliding``: per sample, the ``(node, j)`` pairs held on a switching surface (and ``(node, i, j)`` max-pool
    entries held equal), after the surface check of the settled samples (:func:`~.switching.check_surfaces`) and
    the Filippov search of the others (:func:`on_switching_surface`, whose equilibria are checked again; one that
    the check pushes off a surface is searched again from there, up to :data:`SEARCHES` times); ``state``,
    ``pattern`` and ``settled`` (from :func:`~.switching.iterate_pattern`) are changed in place.  ``forces`` and
    ``rest`` are :func:`~.switching.check_surfaces`'s, ``tied`` :func:`~.switching.iterate_pattern`'s."""
    sliding = [[] for _ in range(X.shape[0])]
    values = node_values(sheaf.graph, solve.layout, state)      # views: the check holds its coordinates at 0
    decided = None if tied is None else forward_zeros(sheaf.graph, tied)
    check_surfaces(sheaf, X, values, pattern, settled, sliding, forces, rest, decided)
    todo = ~settled
    for _ in range(SEARCHES):
        for s in np.flatnonzero(todo):
            rows = {name: p[s:s + 1].copy() for name, p in pattern.items()}
            one = None if tied is None else {name: v[s:s + 1] for name, v in tied.items()}
            found = on_switching_surface(solve, sheaf, X[s:s + 1], Y[s:s + 1], rows, max_iter, one, sliding[s])
            sliding[s] = []
            if found is not None:
                state[s, :found[0].size], sliding[s], rows = found
                for name, p in pattern.items():
                    p[s] = rows[name][0]
                settled[s] = True
        again = settled & todo          # a Filippov equilibrium may leave more coordinates at exactly 0
        check_surfaces(sheaf, X, values, pattern, again, sliding, forces, rest, decided)
        pushed = settled & todo & ~again
        settled &= again | ~todo
        todo = pushed
        if not todo.any():
            break
    return sliding


def on_switching_surface(solve, sheaf, x, y, pat, max_iter, tied=None, held=()):
    """``(state, held, pattern)`` of a Filippov equilibrium of one sample, or None.

    Frozen solves from the sample's last pattern ``pat`` (``{node: (1, n)}``, changed in place): a pattern
    that comes back (a cycle) holds the mask coordinates that flip in it at ``z = 0`` (``(node, j)`` in
    ``held``) and the two entries of every max-pool window whose selection flips in it equal (``(node, i, j)``,
    ``node`` the window's parent); a consistent solution is accepted when both sides push into the surface at
    every held coordinate and pair, and one that fails the condition is released to the side it is pushed to.
    ``sheaf`` is the graph's :class:`~sheaflinalg.sheaf.matrix_free.residuals.GraphSheaf` (the held coordinates
    are never the output node's, so the output edge's force is not needed); ``tied``:
    :func:`~.switching.read_pattern`'s, the sample's forward values.  Pairs that share an entry hold a group of
    entries equal; only a solve whose ``holds_pairs`` attribute is true holds pairs (otherwise a cycle of
    selections alone is not searched: None); ``held``: the coordinates and pairs held from the start.

    Windows over dead ReLUs pulled down (:mod:`~.window_levels`, with :data:`LEVELS`): whenever a solve flips
    windows of such a group, the group's levels are read off that solve and held instead of its previous ones
    (every level a star of pairs), so that the search holds the sliding modes of all its windows at once
    rather than discovering their ties one cycle at a time; a group that Filippov's condition releases is read
    off again (split as any group when that gives back the levels it held).  Once a pattern and surface come
    back, levels read again could go round with the window outputs they move: from then on a flipping window's
    entries join the level it selected (with every entry tied with its new largest), at once for a window that
    flips back, and only Filippov's condition splits a group (a release that comes back is not read as levels
    again: its own split stands).  A mask coordinate that flips back to the side it had two solves before is held
    at once (the levels change the surface, so such a cycle need not repeat a whole pattern and surface).
    With :mod:`~.dead_levels`, the solve holds a group of dead entries as one coordinate, not as pairs.
    A solve with a ``precision`` attribute solves loosely first: Filippov's condition is tested on a consistent
    state as the solve left it (a release needs no more), and a state that the solve left loose (its ``loose``
    attribute) is solved again to full precision, read and tested again when the test accepts it or when the same
    pattern and surface were tested loose before (a warm-started loose solve may not resolve the small change of
    the surface since its last test, and the same releases would come round).
    """
    return _Search(solve, sheaf, x, y, tied, held).run(pat, max_iter)


class _Search:
    """The state of one sample's Filippov search (:func:`on_switching_surface`): the held ``surface``, the
    ``level_pairs`` among it, the keys ``seen`` after a flip, the flips of the last solve, the releases made and
    the loose states tested, and whether flipped windows are ``merging`` into their levels."""

    def __init__(self, solve, sheaf, x, y, tied, held):
        self.solve, self.sheaf, self.graph, self.x, self.y, self.tied = solve, sheaf, sheaf.graph, x, y, tied
        self.searched = (MASK, SELECTION) if getattr(solve, "holds_pairs", False) else (MASK,)
        self.surface, self.level_pairs, self.seen = set(held), set(), set()
        self.releases, self.tested_loose = set(), set()
        self.last_flips, self.last_flipped, self.merging = set(), set(), False

    def run(self, pat, max_iter):
        """``(state, held, pattern)`` from the pattern ``pat``, or None (see :func:`on_switching_surface`)."""
        for _ in range(max_iter):
            self._hold_masks(pat)
            solved = self._solved(pat, "loose")
            if _consistent(solved):
                solved, released, kept, pat = self._tested(pat, solved)
            if _consistent(solved):
                if not released:
                    return solved[0][0], sorted(self.surface), pat
                pat = self._released(pat, solved[1], released, kept)
                continue
            pat = self._flipped(pat, solved)
            if pat is None:
                return None
        return None

    def _hold_masks(self, pat):
        """Every held mask coordinate set active in ``pat`` (in place): its side does not change the solve (its
        ``z`` is pinned at 0), and active is the side that ``z = 0`` reads, so that a frozen solve of a
        nonlinear output can settle."""
        at_zero = {}
        for held in self.surface:
            if len(held) == 2:
                at_zero.setdefault(held[0], []).append(held[1])
        for node in mask_nodes(self.graph):
            pat[node.name][0, at_zero.get(node.inputs[0], [])] = True

    def _solved(self, pat, precision):
        """``(state, values, new, flips, flipped, moved)``: the frozen solve under ``pat`` holding the surface, its
        nodes' values, the pattern read off them, the mask coordinates and window pairs it flips outside the
        surface, and whether a piece the search does not hold moved; ``precision``: the solve's own (``"loose"``
        or ``"tight"``), when it has one."""
        solve, graph, surface = self.solve, self.graph, self.surface
        own = getattr(solve, "precision", None)
        if own is not None:
            solve.precision = precision
        try:
            state = solve(self.x, self.y, pat, independent(surface))
        finally:
            if own is not None:
                solve.precision = own
        values = node_values(graph, solve.layout, state)
        new = read_pattern(graph, self.x, values, pat, self.tied)
        flips = _flipped_masks(graph, pat, new) - surface
        flipped = _flipped_windows(graph, pat, new) - surface if SELECTION in self.searched else set()
        moved = not same_pattern(graph, new, {n: pat[n] for n in graph.pattern_nodes
                                              if graph.node(n).rule.pattern not in self.searched}, 1)[0]
        return state, values, new, flips, flipped, moved

    def _key(self, pat):
        """The search's state: the pattern ``pat`` and the held surface."""
        return b"".join(pat[n].tobytes() for n in self.graph.pattern_nodes), frozenset(self.surface)

    def _tested(self, pat, solved):
        """``(solved, released, kept, pattern)``: Filippov's condition on the consistent solution ``solved``
        (:func:`_release`: what fails it, the pairs of split groups held again, ``pat`` with the released
        selections), tested again on a tight solve when ``solved`` is loose and it passes, or when the same
        pattern and surface were tested loose before (a warm-started loose solve may not resolve the small change
        of the surface since: the same releases would come round)."""
        graph, surface = self.graph, self.surface
        kept, tested = set(), {name: rows.copy() for name, rows in pat.items()}
        released = _release(graph, self.sheaf, self.x, solved[1], surface, tested, kept)
        key = self._key(pat)
        if getattr(self.solve, "loose", False) and (not released or key in self.tested_loose):
            solved = self._solved(pat, "tight")
            kept, tested = set(), {name: rows.copy() for name, rows in pat.items()}
            released = _consistent(solved) and _release(graph, self.sheaf, self.x, solved[1], surface, tested, kept)
        self.tested_loose.add(key)
        return solved, released, kept, tested if _consistent(solved) else pat

    def _released(self, pat, values, released, kept):
        """The pattern after a release (``released`` dropped from the surface, ``kept`` held again): a released
        level's group has its levels read off this solve again, unless the same release was made before (its own
        split stands)."""
        graph, before = self.graph, self.surface
        trial = {name: rows.copy() for name, rows in pat.items()}
        self.surface = (self.surface - released) | kept
        self.level_pairs = (self.level_pairs - released) | kept
        again = frozenset(released) in self.releases
        self.releases.add(frozenset(released))
        if LEVELS and not again:
            relevelled = _relevel(graph, values, pat, trial, self.surface, self.level_pairs,
                                  _selecting(graph, pat, released))
            if relevelled[0] != before:
                (self.surface, self.level_pairs), pat = relevelled, trial
        return pat

    def _flipped(self, pat, solved):
        """The next pattern after a solution that flips (None: a piece the search does not hold cycles): the
        flipped windows' levels read again (before merging), coordinates that flip back held, and once a pattern and
        surface come back, the flipping coordinates held and flipped windows joined to their levels."""
        graph = self.graph
        _, values, new, flips, flipped, _ = solved
        if flipped and LEVELS and not self.merging:
            self.surface, self.level_pairs = _relevel(graph, values, pat, new, self.surface, self.level_pairs,
                                                      _flipped_selections(graph, pat, new))
        self.surface |= flips & self.last_flips     # back where they were before the last solve: they slide (the
        self.last_flips = flips - self.surface       # levels change the surface: a cycle need not repeat a key)
        if self.merging:                             # and so do windows that flip back
            _join(graph, self.surface, values, pat, new, flipped & self.last_flipped)
        self.last_flipped = flipped
        key = self._key(pat)
        if key in self.seen:
            if not flips | flipped:
                return None         # another piece (a clamp, a tangent; a selection if not held) cycles
            self.surface |= flips   # the pattern cycles: the flipping coordinates slide
            self.merging = True     # and the levels, read again, would go round: flipped windows join them
            _join(graph, self.surface, values, pat, new)
            return pat
        self.seen.add(key)
        return {name: np.array(rows) for name, rows in new.items()}


def _consistent(solved):
    """Whether a :meth:`_Search._solved` solution flips nothing."""
    _, _, _, flips, flipped, moved = solved
    return not flips and not flipped and not moved


def _join(graph, surface, values, old, new, only=None):
    """Hold equal (``surface``, in place) the entry every flipping window selected under ``old`` and each of its
    entries tied with its largest in the one-sample solution ``values`` (``new``'s selection and the entries at the
    same value, up to :data:`ROUNDING`: the window would visit them one solve at a time), each tie once
    (independent rows; a window of a level: its entries join the level's group); ``only``: the windows whose
    two selections are one of these pairs ``(u, i, j)``, ``i < j``."""
    for name, windows in _flipped_selections(graph, old, new).items():
        node = graph.node(name)
        u = node.inputs[0]
        z = values[u][0]
        pos, valid = window_positions(node, graph)
        tol = ROUNDING * max(1.0, float(np.abs(z).max(initial=0.0)))
        root = tie_forest(surface, u)
        for w in windows.tolist():
            entries = pos[w][valid[w]]
            a, b = int(old[name][0, w]), int(new[name][0, w])
            if only is not None and (u, min(a, b), max(a, b)) not in only:
                continue
            for e in entries[z[entries] >= z[new[name][0, w]] - tol].tolist():
                ra, re = tie_root(root, a), tie_root(root, e)
                if ra != re:
                    surface.add((u, min(a, e), max(a, e)))
                    root[ra] = re


def _relevel(graph, values, solved, pattern, surface, level_pairs, only):
    """``(surface, level_pairs)`` with the levels of the window groups of ``only`` (``{node: windows}``) read off
    the one-sample solution ``values`` solved under ``solved`` (:class:`~.window_levels.WindowLevels`) in place of
    the level pairs held on their entries; their windows' selections set in ``pattern`` (in place)."""
    found = WindowLevels(graph, values, solved, only)
    kept = _off_levels(level_pairs, found.entries)
    found.select(pattern)
    return (surface - level_pairs) | kept | found.pairs, kept | found.pairs


def _selecting(graph, pattern, pairs):
    """``{node: windows}``: the windows of every selection node whose selection in the one-sample ``pattern`` is
    an entry of the pairs ``(u, i, j)`` (``u`` the node's parent)."""
    out = {}
    for name in graph.pattern_nodes:
        node = graph.node(name)
        if node.rule.pattern is SELECTION:
            entries = [e for held in pairs if held[0] == node.inputs[0] for e in held[1:]]
            out[name] = np.flatnonzero(np.isin(pattern[name][0], entries))
    return out


def _off_levels(pairs, entries):
    """The pairs ``(u, i, j)`` of ``pairs`` neither of whose entries is in ``entries`` (pairs ``(u, i, j)`` or
    entries ``(u, j)``)."""
    held = {(h[0], e) for h in entries for e in h[1:]}
    return {p for p in pairs if (p[0], p[1]) not in held and (p[0], p[2]) not in held}


def _flipped_selections(graph, old, new):
    """``{node: windows}``: the windows of every selection node whose selection differs in the one-sample
    patterns ``old`` and ``new``."""
    return {name: np.flatnonzero(new[name][0] != old[name][0]) for name in graph.pattern_nodes
            if graph.node(name).rule.pattern is SELECTION}


def _flipped_masks(graph, old, new):
    """``{(u, j)}``: the coordinates of the parent ``u`` of a mask node whose side differs in the one-sample
    patterns ``old`` and ``new``."""
    return {(node.inputs[0], int(j)) for node in mask_nodes(graph)
            for j in np.flatnonzero(new[node.name][0] != old[node.name][0])}


def _flipped_windows(graph, old, new):
    """``{(u, i, j)}``: the entries ``i < j`` of the parent ``u`` of a max-pool window whose selection is ``i`` in
    one of the one-sample patterns ``old``, ``new`` and ``j`` in the other."""
    pairs = set()
    for name in graph.pattern_nodes:
        node = graph.node(name)
        if node.rule.pattern is SELECTION:
            for a, b in zip(old[name][0], new[name][0]):
                if a != b:
                    pairs.add((node.inputs[0], int(min(a, b)), int(max(a, b))))
    return pairs


def _release(graph, sheaf, x, values, surface, pat, kept):
    """Held coordinates and groups of tied entries where Filippov's condition fails, set in ``pat`` to the side
    they are pushed to (:func:`~.window_ties.release_ties` for the max-pool windows, which adds to ``kept`` the
    pairs of a released group that are held again)."""
    res = sheaf.residuals(x, values)          # at z_j = 0 the read-off mask is active: the force is f_above
    force = sheaf.force(res)
    released = release_ties(graph, res, force, [held for held in surface if len(held) == 3], pat, kept)
    for u, j in (held for held in surface if len(held) == 2):
        children = [node for node in mask_nodes(graph) if node.inputs[0] == u]
        above = force[u][0, j]
        below = above - sum((1.0 - node.rule.slope(node)) * res.edges[node.name][0, j] for node in children)
        if not (below >= 0.0 and above <= 0.0):
            released.add((u, j))
            for node in children:
                pat[node.name][0, j] = above > 0.0
    return released
