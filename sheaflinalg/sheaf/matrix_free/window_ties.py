"""Max-pool windows whose entries are held equal (a Filippov sliding mode of a max-pool switching surface):
whether a held group slides.

Overlapping windows (a stride below the kernel) share entries: two sliding windows that share one hold the union
of their entries equal, and each window's pull ``e_w`` (its edge residual, on its selected entry) is spread over
its own entries of the group with convex weights. :func:`group_slides` decides whether such weights exist: with
``F`` the force on every entry of the group without the windows' pulls, ``F_j + sum_w a_wj e_w`` must be one
value over the group (a linear feasibility problem; one window: the closed form of :func:`release_ties`; groups
whose windows all pull down and balance exactly: Gale's subset condition, :func:`_transported`; the rest: one
linear problem for all of them, :func:`groups_slide`). A window pulling up raises one of its tied entries, not a
mix: the test is then made for every such selection. :func:`release_ties` applies it to the groups a Filippov
search holds (:func:`~sheaflinalg.sheaf.matrix_free.filippov.on_switching_surface`) and sets the selections of
the groups that fail; :func:`independent` drops the pairs a cycle of pairs makes redundant.
"""

import itertools

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ...network.ops import SELECTION


def window_positions(node, graph):
    """``(pos, valid)``, ``(windows, kernel)``: the parent's flat entry of every slot of every window of the
    max-pool ``node`` (channels outermost, as the node's windows are numbered) and whether the slot is inside
    the input (not padding)."""
    channels, n_in, index, _ = node.rule.windows(node, graph)
    pos = (np.arange(channels)[:, None, None] * n_in + np.maximum(index, 0)[None]).reshape(channels * index.shape[0], -1)
    return pos, np.tile(index >= 0, (channels, 1))


#: Largest number of selections of a group's windows pulling up that :func:`group_slides` tries (one linear
#: feasibility problem each); a group with more is taken as not sliding.
CHOICES = 256


def group_slides(F, pulls, members, tol):
    """``(slides, short, choice)``: whether a group of entries held equal slides, and where it does not, the
    entries that the closest weights leave off by more than ``tol`` (the windows' pulls do not reach them: they
    belong to another level) and the selection of the windows pulling up that fails (``choice``, per window
    the group entry it selects, -1 for a window pulling down; None when every window pulls down).

    A window pulling down (``pulls[w] <= 0``) spreads its pull over its members with convex weights ``a_w``
    (its edge term is convex there); a window pulling up raises whichever of its tied members is largest (a
    concave term): the tie is a local minimum only if, for *every* selection of the windows pulling up, convex
    weights of the others make ``F_j + sum_w a_wj pulls[w]`` one value ``c`` over the group (within ``tol`` per
    entry).  So a tie that one window alone pulls up never slides, while two entries pulled up by a window each
    and held together by a window pulling down can.

    Parameters
    ----------
    F : ndarray, shape (n,)
        The force on each entry of the group without the windows' pulls.
    pulls : ndarray, shape (W,)
        Each window's edge residual ``e_w`` (its pull on its selected entry).
    members : ndarray of bool, shape (W, n)
        The group's entries in each window.
    tol : float

    Examples
    --------
    >>> F = np.array([1.0, 1.0, 1.0])               # two windows pulling the shared middle entry down
    >>> group_slides(F, np.array([-1.5, -1.5]), np.array([[1, 1, 0], [0, 1, 1]], bool), 1e-9)[0]
    True
    >>> group_slides(F, np.array([0.5]), np.array([[1, 1, 1]], bool), 1e-9)[0]   # a pull up: no sliding
    False
    >>> pair = np.array([[1, 0], [1, 1], [0, 1]], bool)          # each entry pulled up, the pair held down
    >>> group_slides(np.array([-1.0, -1.0]), np.array([1.5, -1.0, 1.5]), pair, 1e-9)[0]
    True
    """
    return groups_slide([(F, pulls, members, tol)])[0]


def groups_slide(groups):
    """:func:`group_slides` of every group ``(F, pulls, members, tol)`` of ``groups``, with one linear problem for
    all of them (:func:`_balanced`)."""
    trials = [_trials(*group) for group in groups]
    outcomes = iter(_balanced([problem for tried in trials for _, problem in tried or ()]))
    return [_verdict(*group, tried, None if tried is None else [next(outcomes) for _ in tried])
            for group, tried in zip(groups, trials)]


def _trials(F, pulls, members, tol):
    """The balance problems ``(F, pulls, members, tol)`` of :func:`group_slides`, one per selection of the windows
    pulling up (``(picked, problem)``; ``picked`` None when every window pulls down), or None when there are more
    than :data:`CHOICES` selections."""
    up = pulls > tol
    if not up.any():
        return [(None, (F, pulls, members, tol))]
    options = [np.flatnonzero(members[w]) for w in np.flatnonzero(up)]
    if np.prod([o.size for o in options], dtype=float) > CHOICES:
        return None
    trials = []
    for picked in itertools.product(*options):
        raised = F.copy()
        np.add.at(raised, list(picked), pulls[up])
        trials.append((picked, (raised, pulls[~up], members[~up], tol)))
    return trials


def _verdict(F, pulls, members, tol, trials, outcomes):
    """:func:`group_slides`' answer from its :func:`_trials` and their outcomes (:func:`_balanced`, in order): the
    first selection that fails decides."""
    up = pulls > tol
    if trials is None:              # too many selections: taken as not sliding, each window its largest force
        choice = np.full(pulls.size, -1)
        choice[up] = [o[int(np.argmax(F[o]))] for o in (np.flatnonzero(row) for row in members[up])]
        return False, np.zeros(F.size, dtype=bool), choice
    for (picked, _), (balanced, short) in zip(trials, outcomes):
        if not balanced:
            if picked is None:
                return False, short, None
            choice = np.full(pulls.size, -1)
            choice[up] = picked
            return False, short, choice
    return True, np.zeros(F.size, dtype=bool), None


#: Most windows of a balance problem that :func:`_transported` decides (it tries every subset of them).
HALL_WINDOWS = 10


def _balanced(problems):
    """Per problem ``(F, pulls, members, tol)``, ``(balanced, short)``: whether convex weights of the windows (rows
    of ``members``) over their members make ``F_j + sum_w a_wj pulls[w]`` one value over the entries within ``tol``,
    and the entries the closest weights leave off by more.  A problem :func:`_transported` balances exactly is
    balanced; the others share one linear problem (:func:`_balanced_linear`)."""
    out = [(True, np.zeros(F.size, dtype=bool)) if _transported(F, pulls, members) else None
           for F, pulls, members, _ in problems]
    rest = [i for i, o in enumerate(out) if o is None]
    for i, outcome in zip(rest, _balanced_linear([problems[i] for i in rest])):
        out[i] = outcome
    return out


def _transported(F, pulls, members):
    """Whether windows that all pull down balance the group exactly (False: not decided here).

    With ``P_w = -pulls[w] >= 0`` the weights carry ``q_wj = a_wj P_w`` from each window to its members, and the
    common value is ``c = (sum F - sum P) / n``, so each entry must receive ``d_j = F_j - c >= 0``: a
    transportation problem with equal totals, feasible exactly when every set ``A`` of windows has
    ``P(A) <= d(N(A))`` (``N(A)`` the entries of its windows; Gale's theorem, the max-flow min-cut bound), tried
    for every subset of at most :data:`HALL_WINDOWS` windows.  Rounding aside (``1e-12`` of the problem's scale),
    it says balanced only where the linear problem's optimum is 0.
    """
    W, n = members.shape
    if W == 0 or W > HALL_WINDOWS or np.any(pulls > 0.0):
        return False
    supply = -pulls
    c = (F.sum() - supply.sum()) / n
    demand = F - c
    rounding = 1e-12 * (n + W) * max(np.abs(F).max(), supply.max(), np.finfo(float).tiny)
    if demand.min() < -rounding:
        return False
    subsets = (np.arange(1, 2**W)[:, None] >> np.arange(W)[None, :]) & 1          # (2^W - 1, W)
    reached = (subsets @ members.astype(np.int64)) > 0
    return bool(np.all(subsets @ supply <= reached @ np.maximum(demand, 0.0) + rounding))


def _balanced_linear(problems):
    """:func:`_balanced` by one linear problem for all of ``problems`` (their blocks are independent, so its optimum
    is each one's): unknowns per problem the weights, the value ``c`` and slacks above and below per entry, whose
    sum is minimised."""
    if not problems:
        return []
    rows, cols, vals, b_eq, cost, lower, spans, scales = [], [], [], [], [], [], [], []
    r0 = c0 = 0
    for F, pulls, members, _ in problems:
        W, n = members.shape
        scale = max(np.abs(F).max(initial=0.0), np.abs(pulls).max(initial=0.0), np.finfo(float).tiny)
        F, pulls = F / scale, pulls / scale         # each block at the solver's own scale (its tolerances are absolute)
        scales.append(scale)
        weight = np.argwhere(members)                    # (window, entry) of every weight
        k = weight.shape[0]
        entry = np.arange(n)
        rows += [r0 + weight[:, 1], r0 + entry, r0 + entry, r0 + entry, r0 + n + weight[:, 0]]
        cols += [c0 + np.arange(k), np.full(n, c0 + k), c0 + k + 1 + entry, c0 + k + 1 + n + entry,
                 c0 + np.arange(k)]
        vals += [pulls[weight[:, 0]], -np.ones(n), np.ones(n), -np.ones(n), np.ones(k)]
        b_eq += [-F, np.ones(W)]
        cost += [np.zeros(k + 1), np.ones(2 * n)]
        lower += [np.zeros(k), [-np.inf], np.zeros(2 * n)]
        spans.append((c0 + k + 1, n))
        r0, c0 = r0 + n + W, c0 + k + 1 + 2 * n
    A = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, c0))
    bounds = np.stack([np.concatenate(lower), np.full(c0, np.inf)], axis=1)
    result = linprog(np.concatenate(cost), A_eq=A, b_eq=np.concatenate(b_eq), bounds=bounds, method="highs")
    if result.status != 0:
        return [(False, np.ones(n, dtype=bool)) for _, n in spans]
    out = []
    for (lo, n), scale, (*_, tol) in zip(spans, scales, problems):
        short = result.x[lo:lo + n] + result.x[lo + n:lo + 2 * n] > tol / scale
        out.append((not short.any(), short))
    return out


def release_ties(graph, res, force, pairs, pat, kept):
    """The pairs ``(u, i, j)`` held equal whose group (the entries they tie) fails Filippov's condition; every
    window's selection in the group is then set in ``pat`` to its entry of the group with the largest force.
    A group of several windows that their pulls reach only in part is held again without the entries left
    short (their pairs in ``kept``), each window selecting its largest force among what it keeps.

    The window's edge residual ``e = m - u_s`` pulls the selected entry ``s`` with ``e``; with every other force
    ``F`` the sliding mode spreads the pull with convex weights ``a`` so that ``F_s + a_s e`` is one value ``c``
    over the group: for one window that covers the whole tie, ``c - F_s`` must lie in ``[e, 0]`` (``e <= 0``: every
    side pushes into the tie); otherwise (overlapping windows sharing entries, or a tied entry no selecting
    window reaches), :func:`group_slides`.
    """
    released, tables, several = set(), {}, []
    groups = _groups(sorted(pairs))         # one order, whatever the set's: the groups share one linear problem
    for group, windows in zip(groups, _selecting_windows(graph, groups, pat)):
        u = group[0][0]
        entries = np.array(sorted({j for held in group for j in held[1:]}))
        if not windows:             # no window selects the group any more: held equal, it is pulled apart
            F = force[u][0, entries]
            if np.abs(F).max() > 1e-9 * (1.0 + np.abs(F).max()):
                released.update(group)
            continue
        pulls = np.array([res.edges[node.name][0, w] for node, w in windows])
        F = force[u][0, entries] - sum(e * (entries == res.pattern[node.name][0, w])
                                       for e, (node, w) in zip(pulls, windows))
        tol = 1e-9 * (1.0 + np.abs(pulls).max() + np.abs(F).max())
        for node, _ in windows:
            if node.name not in tables:
                tables[node.name] = window_positions(node, graph)
        members = np.array([np.isin(entries, tables[node.name][0][w][tables[node.name][1][w]])
                            for node, w in windows])
        if len(windows) > 1 or not members.all():   # overlapping windows, or entries outside the one's reach
            several.append((group, windows, members, entries, F, pulls, tol))
            continue
        gap = F.sum() / entries.size + pulls[0] / entries.size - F         # c - F_s
        if not (gap.min() >= min(pulls[0], 0.0) - tol and gap.max() <= tol):
            released.update(group)
            for (node, w), own in zip(windows, members):
                pat[node.name][0, w] = entries[own][int(np.argmax(F[own]))]
    verdicts = groups_slide([(F, pulls, members, tol) for *_, members, _, F, pulls, tol in several])
    for (group, windows, members, entries, F, pulls, _), (slides, short, choice) in zip(several, verdicts):
        if not slides:
            released.update(group)
            _select_released(pat, windows, members, entries, F, pulls, short, choice, kept, group[0][0])
    return released


def _selecting_windows(graph, groups, pat):
    """Per group of pairs ``(u, i, j)``, the ``(node, window)`` of every max-pool window over ``u`` whose selection
    in the one-sample ``pat`` is an entry of the group (nodes in order, windows ascending)."""
    held = {}
    for g, group in enumerate(groups):
        entries, ids = held.setdefault(group[0][0], ([], []))
        for _, i, j in group:
            entries += (i, j)
            ids += (g, g)
    label = {}
    for u, (entries, ids) in held.items():
        label[u] = np.full(graph.sizes[u], -1)
        label[u][entries] = ids
    out = [[] for _ in groups]
    for node in graph.nodes:
        if node.rule.pattern is SELECTION and node.inputs[0] in label:
            g = label[node.inputs[0]][pat[node.name][0]]
            for w in np.flatnonzero(g >= 0).tolist():
                out[g[w]].append((node, w))
    return out


def _select_released(pat, windows, members, entries, F, pulls, short, choice, kept, u):
    """The selections of a released group of several windows, set in ``pat``: a window pulling up takes the
    entry of the selection that failed (``choice``, :func:`group_slides`), every other window
    its entry with the largest force (the raised entries' pulls counted).  When the closest weights leave only
    some entries short, the rest is held again (a star of pairs added to ``kept``) and the windows choose
    among it."""
    force = F.copy()
    if choice is not None:
        raised = choice >= 0
        np.add.at(force, choice[raised], pulls[raised])
    split = 1 < np.sum(~short) < entries.size
    if split:
        kept.update((u, int(entries[~short][0]), int(b)) for b in entries[~short][1:])     # a star
    for (node, w), own, picked in zip(windows, members, np.full(len(windows), -1) if choice is None else choice):
        if picked >= 0:
            pat[node.name][0, w] = entries[picked]
            continue
        own = own & ~short if split else own
        if own.any():
            pat[node.name][0, w] = entries[own][int(np.argmax(force[own]))]


def tie_forest(surface, u):
    """``{entry: parent}``: the union-find forest of the entries of ``u`` that the pairs of ``surface`` hold equal
    (:func:`tie_root` finds an entry's group; joining two roots ``root[a] = b`` joins their groups)."""
    root = {}
    for held in surface:
        if len(held) == 3 and held[0] == u:
            root[tie_root(root, held[1])] = tie_root(root, held[2])
    return root


def independent(surface):
    """The held coordinates and pairs of ``surface`` (sorted) without the pairs whose entries other pairs already
    hold equal (a cycle of pairs: a dependent column of the pinned system)."""
    root, kept = {}, []
    for held in sorted(surface):
        if len(held) == 3:
            a, b = tie_root(root, held[:2]), tie_root(root, (held[0], held[2]))
            if a == b:
                continue
            root[a] = b
        kept.append(held)
    return kept


def _groups(pairs):
    """The pairs ``(u, i, j)`` grouped by the entries they tie together (connected through shared entries)."""
    root = {}
    for u, i, j in pairs:
        root[tie_root(root, (u, i))] = tie_root(root, (u, j))
    groups = {}
    for pair in pairs:
        groups.setdefault(tie_root(root, pair[:2]), []).append(pair)
    return list(groups.values())


def tie_root(root, entry):
    """The representative of ``entry`` in the union-find forest ``root`` (``{entry: parent}``, paths halved)."""
    while root.setdefault(entry, entry) != entry:
        root[entry] = root[root[entry]]
        entry = root[entry]
    return entry
