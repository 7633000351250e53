"""The levels of max-pool windows over dead ReLUs pulled down: the sliding modes of a window group in one pass.

A window ``w`` of a max pool whose entries ``a_j`` are all outputs of inactive ReLUs (each entry's own edge pulls
it back to 0, nothing else pulls it) and whose output ``m_w`` lies below them is a sliding mode: the entry it
selects follows ``m_w`` down, another (still at 0) becomes the largest, and the pattern iteration visits the
entries one at a time.  With the outputs ``m`` held where a solve left them, the entries minimise the convex
energy

``sum_j a_j^2 / 2 + sum_w (max_{j in w} a_j - m_w)^2 / 2``

(convex where every window's largest entry lies above its output, the window pulling down), i.e. with a level
``t_w`` per window, ``sum_j a_j^2 / 2 + sum_w (t_w - m_w)^2 / 2`` subject to ``a_j <= t_w`` for the entries of
``w``.  Its dual is a smooth problem in the multipliers ``mu_wj >= 0`` (``a_j = -sum_w mu_wj``,
``t_w = m_w + sum_j mu_wj``), solved by exact coordinate steps (:func:`swept_levels`: every window and entry is
held by its own edge, so the sweeps converge geometrically even over a whole dead channel, 3,000 windows of a
224 x 224 image, where a dense non-negative least-squares solve per group would not fit in memory).  The
entries at their window's level form *levels* (an isolated window of ``n`` entries: all at ``m_w / (n + 1)``;
overlapping windows: the weaker window's entries above the stronger one's): a level is held equal in the next
frozen solve (pairs ``(u, anchor, j)``, a star around one entry, whose columns ``e_anchor - e_j`` keep the held
block of the pinned system near the identity where a chain of pairs would not), every window of the level
selecting one of its entries.  At a Filippov equilibrium the outputs are the equilibrium's and the entries are
the minimiser given them (a block of the same convex energy): the levels read off it are the ones it holds, so
a search that holds the levels read off each solve stops there (:func:`~.filippov.on_switching_surface`).
"""

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ...kernels.levels import hildreth_sweeps
from ...kernels.structs import Memberships
from ...network.graph.nodes import INPUT
from ...network.ops import MASK, SELECTION
from .window_ties import window_positions

#: Relative size (of the group's largest ``|m_w|``) of a gap under which an entry is at its window's level.
LEVEL_RTOL = 1e-9
#: The stiffness of the windows' edges in the levels' problem (:func:`levels`): 1 holds the window outputs
#: where the solve left them; below 1 they follow the levels, as the rest of the network lets them.
STIFFNESS = 1.0


def levels(members, target, stiffness=1.0, weight=None, rest=None):
    """``(a, t)``: the entries and window levels minimising
    ``sum_j weight_j (a_j - rest_j)^2 / 2 + sum_w stiffness (t_w - target_w)^2 / 2`` subject to ``a_j <= t_w`` for
    the entries of each window (``members``, ``(W, n)`` bool; ``target``, ``(W,)``): :func:`swept_levels` of one
    group given as a matrix.

    ``weight`` 1 and ``rest`` 0 (the defaults) are the entries' own ReLU edges; a window pulling its selected
    entry up adds its edge to that entry's ``weight`` and ``rest``.  ``stiffness`` 1 with the targets the window
    outputs is the module docstring's energy; below 1 the outputs follow the levels (an output pulled by the rest
    of the network with stiffness ``k`` behind the window's edge: ``stiffness = k / (1 + k)``).  Raises
    ``RuntimeError`` if the sweeps do not converge within :data:`SWEEPS`.

    Examples
    --------
    >>> a, t = levels(np.ones((1, 3), dtype=bool), np.array([-4.0]))    # one window of 3: all at m / 4
    >>> np.allclose(a, -1.0) and np.allclose(t, -1.0)
    True
    """
    n = members.shape[1]
    rows, entries = np.nonzero(members)
    slots = (np.cumsum(members, axis=1) - 1)[rows, entries]
    a, t, converged = swept_levels(rows, entries, slots, target, stiffness,
                                   np.ones(n) if weight is None else weight, np.zeros(n) if rest is None else rest)
    if not converged:
        raise RuntimeError(f"the levels of {members.shape[0]} windows did not converge in {SWEEPS} sweeps")
    return a, t


#: Sweeps of :func:`swept_levels` before it gives up (it reports whether it converged).
SWEEPS = 5000


def swept_levels(rows, entries, slots, target, stiffness=1.0, weight=None, rest=None, tol=1e-14):
    """``(a, t, converged)``: :func:`levels` of many windows at once, by sweeps over their memberships.

    The same convex problem (``sum_j weight_j (a_j - rest_j)^2 / 2 + sum_w stiffness (t_w - target_w)^2 / 2``
    subject to ``a_j <= t_w`` for every membership ``(rows[i], entries[i])``), solved by coordinate ascent on its
    dual (Hildreth's method): one multiplier per membership, each update exact, the memberships of one slot of
    the windows (``slots``) updated together (no two share a window or an entry).  Every window is held by its
    own edge and every entry by its own, so the sweeps converge at a geometric rate however large the group; a
    dense non-negative least-squares solve of a group of 3,000 windows (a dead channel of a 224 x 224 image)
    would not fit in memory.  Stops when no constraint is violated and no multiplier is positive on a slack
    constraint by more than ``tol`` times the problem's scale.

    Parameters
    ----------
    rows, entries, slots : ndarray of int, shape (k,)
        Per membership its window, its entry and its slot (memberships of one slot: distinct windows and entries).
    target : ndarray, shape (W,)
    stiffness : float
    weight, rest : ndarray, shape (n,), optional
        Per entry (default 1 and 0).
    tol : float

    Examples
    --------
    >>> rows, entries, slots = np.zeros(3, dtype=int), np.arange(3), np.arange(3)     # one window of 3
    >>> a, t, converged = swept_levels(rows, entries, slots, np.array([-4.0]))
    >>> bool(converged and np.allclose(a, -1.0) and np.allclose(t, -1.0))            # all at m / 4
    True
    """
    n = int(entries.max()) + 1 if entries.size else 0
    weight = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    a = np.zeros(n) if rest is None else rest.astype(float).copy()
    t, mu = target.astype(float).copy(), np.zeros(rows.size)
    scale = tol * (np.abs(target).max(initial=0.0) + np.abs(a).max(initial=0.0) + np.finfo(float).tiny)
    rows, entries = rows.astype(np.int64), entries.astype(np.int64)
    members = Memberships(rows, entries, np.concatenate([np.zeros(0, dtype=np.int64),
                                                         *_independent_classes(rows, entries, slots)]),
                          1.0 / weight[entries] + 1.0 / stiffness, weight, float(stiffness))
    converged = hildreth_sweeps(members, a, t, mu, SWEEPS, scale)
    return a, t, converged


def _independent_classes(rows, entries, slots):
    """The memberships split into classes of distinct windows and distinct entries: by slot (a window has one
    membership per slot), then by how many memberships of the slot came before with the same entry."""
    key = np.stack([slots, entries], axis=1)
    order = np.lexsort((np.arange(rows.size), entries, slots))
    first = np.r_[True, np.any(key[order][1:] != key[order][:-1], axis=1)]
    start = np.maximum.accumulate(np.where(first, np.arange(rows.size), 0))
    rank = np.empty(rows.size, dtype=np.int64)
    rank[order] = np.arange(rows.size) - start
    _, label = np.unique(np.stack([slots, rank], axis=1), axis=0, return_inverse=True)
    label = label.ravel()
    return [np.flatnonzero(label == c) for c in range(label.max(initial=-1) + 1)]


class WindowLevels:
    """Per sample, the levels of the max-pool windows over dead ReLUs that a solution pulls down.

    ``pairs`` holds, for the one-sample solution it was read from, the ``(u, i, j)`` entries of ``u`` held
    equal (stars around each level's anchor), ``selections`` the ``{node: {window: entry}}`` each level's
    windows select and ``entries`` the ``(u, j)`` entries of every group read (``only``: ``{node: windows}``,
    the groups with one of these windows; all when None).
    """

    def __init__(self, graph, values, pattern, only=None):
        self.pairs, self.selections, self.entries = set(), {}, set()
        for node in (graph.node(n) for n in graph.pattern_nodes):
            if node.rule.pattern is SELECTION and dead_parent(graph, node.inputs[0]):
                self._read(graph, node, values, pattern, None if only is None else only.get(node.name, ()))

    def _read(self, graph, node, values, pattern, only):
        """The levels of ``node``'s groups of windows over dead entries pulled down (the groups with a window in
        ``only`` when given)."""
        u = node.inputs[0]
        pos, valid = window_positions(node, graph)
        dead = ~pattern[u][0]
        t = values[u][0, pattern[node.name][0]]
        pull = values[node.name][0] - t                  # the window's edge residual on its selected entry
        scale = np.abs(pull).max() if pull.size else 0.0
        over_dead = np.all(dead[pos] | ~valid, axis=1)
        candidate = np.flatnonzero(over_dead & (pull < -LEVEL_RTOL * scale))
        if candidate.size == 0:
            return
        target = t + pull / STIFFNESS
        up = np.flatnonzero(over_dead & (pull > LEVEL_RTOL * scale))        # pulling their selected entry up
        weight, rest = np.ones(dead.size), np.zeros(dead.size)
        np.add.at(weight, pattern[node.name][0, up], STIFFNESS)
        np.add.at(rest, pattern[node.name][0, up], STIFFNESS * target[up])
        rest /= weight
        win, slot = np.nonzero(valid[candidate])
        rows, entries = candidate[win], pos[candidate][win, slot]
        wanted = np.ones(pull.size, dtype=bool)
        if only is not None:
            wanted[:] = False
            wanted[np.asarray(only, dtype=np.int64)] = True
        groups = [g for g in _groups(rows, entries, pull.size) if wanted[rows[g]].any()]
        if not groups:
            return
        kept = np.concatenate(groups)
        # not converged within SWEEPS: the levels are still only the search's proposal, which Filippov's test judges
        a, level, _ = swept_levels(rows[kept], entries[kept], slot[kept], target, STIFFNESS, weight, rest)
        chosen = self.selections.setdefault(node.name, {})
        for group in groups:
            windows, own = np.unique(rows[group]), np.unique(entries[group])
            self.entries.update((u, int(e)) for e in own)
            members = np.zeros((windows.size, own.size), dtype=bool)
            members[np.searchsorted(windows, rows[group]), np.searchsorted(own, entries[group])] = True
            tol = LEVEL_RTOL * np.abs(level[windows]).max()
            self._hold(u, chosen, windows, own, members & (a[own][None, :] >= level[windows][:, None] - tol))

    def _hold(self, u, chosen, windows, own, at_level):
        """Hold every level of one group (``at_level``: ``(W, n)``, entry ``own[j]`` at window ``windows[w]``'s
        level) as a star around the entry most of its windows share, each window selecting its most shared
        entry of the level."""
        for level_windows, level_entries in _levels_of(at_level):
            if level_entries.size < 2:
                continue
            counts = at_level[level_windows][:, level_entries].sum(axis=0)
            anchor = own[level_entries[np.argmax(counts)]]
            self.pairs.update((u, int(min(anchor, e)), int(max(anchor, e))) for e in own[level_entries]
                              if e != anchor)
            for w in level_windows:
                mine = at_level[w, level_entries]
                chosen[int(windows[w])] = int(own[level_entries[mine][np.argmax(counts[mine])]])

    def select(self, pattern):
        """Set every level window's selection in the one-sample ``pattern`` (in place)."""
        for name, chosen in self.selections.items():
            if chosen:
                pattern[name][0, list(chosen)] = list(chosen.values())


class LevelsHandoff:
    """``handoff(old, new, samples)`` for :func:`~.switching.iterate_pattern`: per sample, whether its solves now
    flip selections of max-pool windows over dead ReLUs (the levels' domain: the pattern iteration visits such
    windows' entries one at a time, the Filippov search holds their levels) and, outside that domain, only
    activations that the update before flipped too (coordinates going back and forth: switching surfaces the
    search holds), so that the search takes the sample over.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)            # no max pools: nothing is handed over
    >>> old = {name: np.zeros((1, 3), dtype=bool) for name in net.graph.pattern_nodes}
    >>> new = {name: np.ones((1, 3), dtype=bool) for name in net.graph.pattern_nodes}
    >>> handoff = LevelsHandoff(net.graph)
    >>> bool(handoff(old, new, np.array([0]))[0]), bool(handoff(new, old, np.array([0]))[0])
    (False, False)
    """

    def __init__(self, graph):
        self.graph, self._outside, self._levelled = graph, {}, {}
        for name in graph.pattern_nodes:
            node = graph.node(name)
            if node.rule.pattern is SELECTION and dead_parent(graph, node.inputs[0]):
                self._levelled[name] = (node.inputs[0], *window_positions(node, graph))

    def __call__(self, old, new, samples):
        if not self._levelled:          # no windows over dead ReLUs: a cycle is for the iteration to detect
            return np.zeros(samples.size, dtype=bool)
        flipped, handed = np.zeros(samples.size, dtype=bool), np.zeros(samples.size, dtype=bool)
        outside = [set() for _ in samples]
        for name in self.graph.pattern_nodes:
            diff = (np.asarray(old[name]) != np.asarray(new[name])).reshape(samples.size, -1)
            flipped |= diff.any(axis=1)
            if name in self._levelled:
                u, pos, valid = self._levelled[name]
                diff = diff & ~np.all(~old[u][:, pos] | ~valid, axis=2)
            for i, j in zip(*np.nonzero(diff)):
                outside[i].add((name, int(j)))
        for i, s in enumerate(samples.tolist()):
            before = self._outside.get(s)
            handed[i] = flipped[i] and before is not None and outside[i] <= before
            self._outside[s] = outside[i]
        return handed


def dead_parent(graph, u):
    """Whether ``u`` is a ReLU node (a rectifier of slope 0): its inactive entries are pulled back to 0 alone."""
    if u == INPUT:
        return False
    node = graph.node(u)
    return node.rule.pattern is MASK and node.rule.slope(node) == 0.0


def _groups(rows, entries, n_windows):
    """The positions in ``rows`` (windows) and ``entries`` (their entries) of each group of windows connected
    through shared entries, one array per group."""
    labels_of_entries = np.unique(entries, return_inverse=True)[1]
    n = n_windows + labels_of_entries.max() + 1
    adjacency = coo_matrix((np.ones(rows.size), (rows, n_windows + labels_of_entries)), shape=(n, n))
    _, label = connected_components(adjacency, directed=False)
    of_row = label[rows]
    order = np.argsort(of_row, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(of_row[order])) + 1)


def _levels_of(at_level):
    """``[(windows, entries)]``: the groups of windows and entries (local numbers) joined by ``at_level``
    (``(W, n)`` bool: the entry at the window's level)."""
    W, n = at_level.shape
    w, j = np.nonzero(at_level)
    adjacency = coo_matrix((np.ones(w.size), (w, W + j)), shape=(W + n, W + n))
    _, label = connected_components(adjacency, directed=False)
    out = []
    for c in np.unique(label[w]):
        out.append((np.flatnonzero(label[:W] == c), np.flatnonzero(label[W:] == c)))
    return out
