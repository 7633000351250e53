"""Levels of max-pool windows over dead ReLUs (sheaf/matrix_free/window_levels.py) against dense definitions.

Two oracles written from the definitions: the convex energy of the entries of overlapping windows minimised by a
general constrained solver (SLSQP on the levels' quadratic program), and, on small CNNs whose max pool reads dead
ReLUs pulled down by the pin, the Filippov condition of every held group from the dense coboundary: the entries
exactly equal, and convex weights per window over its entries in the group under which the gradient vanishes.
"""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import lsq_linear, minimize

from helpers.naive_graph import coboundary, read_pattern
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.matrix_free import filippov
from sheaflinalg.sheaf.matrix_free.window_levels import levels


def _energy(a, members, target, stiffness, weight, rest):
    """``sum_j weight_j (a_j - rest_j)^2 / 2 + sum_w stiffness (max(max_{j in w} a_j, target_w) - target_w)^2 / 2``:
    the levels' energy with each level at its best (``t_w = max(max_j a_j, target_w)``)."""
    top = np.array([a[row].max() for row in members])
    return 0.5 * weight @ (a - rest) ** 2 + 0.5 * stiffness * np.sum(np.maximum(top - target, 0.0) ** 2)


def _slsqp(members, target, stiffness, weight, rest):
    """The levels' quadratic program in ``(a, t)`` by SLSQP from the definitions (``a_j <= t_w``)."""
    W, n = members.shape
    cons = [{"type": "ineq", "fun": (lambda v, w=w, j=j: v[n + w] - v[j])} for w, j in np.argwhere(members)]
    fun = lambda v: 0.5 * weight @ (v[:n] - rest) ** 2 + 0.5 * stiffness * np.sum((v[n:] - target) ** 2)   # noqa
    start = np.concatenate([np.minimum(rest, target.min()), target])
    return minimize(fun, start, constraints=cons, method="SLSQP", options={"ftol": 1e-15, "maxiter": 500}).x


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), W=st.integers(1, 4), n=st.integers(1, 7), stiffness=st.sampled_from([1.0, 0.3]),
       signs=st.sampled_from(["down", "mixed"]), raised=st.booleans())
def test_levels_minimise_the_window_energy_as_a_constrained_solver_does(seed, W, n, stiffness, signs, raised):
    rng = np.random.default_rng(seed)
    members = rng.random((W, n)) < 0.6
    members[np.arange(W), rng.integers(0, n, size=W)] = True            # no empty window
    target = -rng.uniform(0.1, 2.0, size=W)
    if signs == "mixed":
        target *= rng.choice([-1.0, 1.0], size=W)
    if rng.random() < 0.3:
        target[:] = target[0]                                           # equal pulls: ties between levels
    weight, rest = np.ones(n), np.zeros(n)
    if raised:              # entries that windows pulling up select: heavier, resting above 0
        weight += rng.integers(0, 3, size=n) * stiffness
        rest = np.where(weight > 1, rng.uniform(0.0, 1.0, size=n), 0.0)
    a, t = levels(members, target, stiffness, weight, rest)
    v = _slsqp(members, target, stiffness, weight, rest)
    best = _energy(a, members, target, stiffness, weight, rest)
    assert best <= _energy(v[:n], members, target, stiffness, weight, rest) + 1e-12
    np.testing.assert_allclose(a, v[:n], atol=1e-6)
    assert np.all((a[None, :] <= t[:, None] + 1e-12 * np.abs(target).max()) | ~members)
    for d in rng.normal(size=(20, n)):                  # a convex function's local minimum is its minimum
        assert _energy(a + 1e-4 * d, members, target, stiffness, weight, rest) >= best - 1e-15


def test_an_isolated_window_puts_its_entries_at_its_output_over_its_size_plus_one():
    # one window of n entries pulled to m: n t^2 / 2 + (t - m)^2 / 2 is least at t = m / (n + 1)
    for n in (1, 4, 9):
        a, t = levels(np.ones((1, n), dtype=bool), np.array([-3.0]))
        np.testing.assert_allclose(a, -3.0 / (n + 1))
        np.testing.assert_allclose(t, -3.0 / (n + 1))


def _stem(seed, mode, signed=False):
    """A CNN ``conv -> relu -> maxpool(3, stride 2) -> flatten -> linear``: overlapping windows over ReLUs that
    are dead (``"dead"``: every one, by a negative bias), dead or alive (``"mixed"``), or exactly 0 in a channel
    of zero weights and bias (``"zeros"``); ``signed``: head weights of both signs (windows pulled up and down in
    one group)."""
    rng = np.random.default_rng(seed)
    C, H = 2, int(rng.integers(5, 8))
    W = rng.normal(0, 0.5, size=(C, 1, 3, 3))
    bias = {"dead": -np.full(C, 5.0), "mixed": rng.normal(-0.5, 0.5, size=C), "zeros": np.array([0.0, -5.0])}[mode]
    if mode == "zeros":
        W[0] = 0.0
    conv = Node("conv", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                {"weight": W, "bias": bias})
    pool = Node("pool", "maxpool", ["relu"], {"kernel_size": 3, "stride": 2, "padding": int(rng.integers(0, 2)),
                                             "dilation": 1})
    net = sl.Network.from_nodes((1, H, H), [conv, Node("relu", "relu", ["conv"]), pool])
    n = net.graph.sizes["pool"]
    head = Node("head", "linear", ["flat"], params={"weight": rng.uniform(-1.0 if signed else 0.2, 1.0, size=(2, n)),
                                                     "bias": np.zeros(2)})
    return sl.Network.from_nodes((1, H, H), [conv, Node("relu", "relu", ["conv"]), pool,
                                             Node("flat", "reshape", ["pool"], {"shape": (n,)}), head])


def _groups(pairs):
    """The sets of entries that the pairs ``(u, i, j)`` hold equal."""
    groups = []
    for _, i, j in pairs:
        joined = [g for g in groups if i in g or j in g]
        groups = [g for g in groups if g not in joined] + [set().union({i, j}, *joined)]
    return groups


def _dense_gradient(graph, lay, x, values, pattern):
    """The dense gradient of the discord on the free coordinates under ``pattern``, and the scale of its terms."""
    delta, c, _ = coboundary(graph, lay, x, pattern, reduced=True)
    for node in graph.nodes:
        c[lay.full(node.name)] = values[node.name]
    return delta[:, lay.free_index].T @ (delta @ c), 1.0 + np.abs(delta).max() * np.abs(c).max()


def _least_nonnegative_residual(A, b):
    """``min ||A x - b||`` over ``x >= 0`` (bounded-variable least squares; no columns: ``||b||``)."""
    if A.shape[1] == 0:
        return float(np.linalg.norm(b))
    return float(np.linalg.norm(A @ lsq_linear(A, b, bounds=(0.0, np.inf), method="bvls", tol=1e-14).x - b))


def _check_filippov(net, x, w, sliding):
    """The dense gradient of the discord vanishes on every free coordinate but the pinned output and the held
    ones.  A held ReLU coordinate is exactly 0 with both sides pushing into it; a held group of max-pool entries
    is exactly equal, and convex weights of each window over its entries in the group (the pieces' gradients:
    the window pulling one of its tied largest entries) cancel the gradient there."""
    graph = net.graph
    lay = Layout.from_graph(graph, reduced=True)
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    pattern = read_pattern(graph, values)
    gradient, scale = _dense_gradient(graph, lay, x, values, pattern)
    held = np.zeros(lay.n_free, dtype=bool)
    held[lay.free(graph.output_node)] = True
    for _, j in (h for h in sliding if len(h) == 2):
        k = lay.free("conv").start + j
        assert w[k] == 0.0
        held[k] = True
        below = dict(pattern, relu=pattern["relu"].copy())
        below["relu"][j] = False
        assert _dense_gradient(graph, lay, x, values, below)[0][k] <= 1e-9 * scale and gradient[k] >= -1e-9 * scale
    start = lay.free("relu").start
    node = graph.node("pool")
    _, n_in, index, _ = node.rule.windows(node, graph)
    e = values["pool"] - values["relu"][pattern["pool"]]                # each window's pull on its selection
    for group in _groups([h for h in sliding if len(h) == 3]):
        entries = np.array(sorted(group))
        assert np.all(values["relu"][entries] == values["relu"][entries[0]])
        held[start + entries] = True
        windows = [k for k in range(e.size) if pattern["pool"][k] in group]
        G0 = gradient[start + entries].copy()
        for k in windows:                                   # the gradient without the windows' pulls
            G0[entries == pattern["pool"][k]] += e[k]
        A = np.zeros((entries.size + len(windows), entries.size * len(windows)))
        for col, (k, j) in enumerate((k, j) for k in windows for j in range(entries.size)):
            c_, p = divmod(k, index.shape[0])
            if np.isin(entries[j], c_ * n_in + index[p][index[p] >= 0]):
                A[j, col], A[entries.size + windows.index(k), col] = e[k], 1.0
        assert _least_nonnegative_residual(A, np.concatenate([G0, np.ones(len(windows))])) < 1e-8 * scale
    assert np.abs(gradient[~held]).max() < 1e-9 * scale


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(["dead", "mixed", "zeros"]),
       pull=st.sampled_from([-0.5, -0.05, 0.3]))
def test_the_pinned_discord_of_windows_over_dead_relus_is_a_filippov_equilibrium(seed, mode, pull):
    net = _stem(seed, mode)
    X = np.random.default_rng(seed + 1).normal(size=(2, net.n_inputs))
    Y = net.forward(X) + pull
    pd = sl.discord.pinned(net, X, Y)
    assert pd.settled.all() or mode == "zeros"      # active ReLUs at exactly 0 under the windows: not always
    for s in np.flatnonzero(pd.settled):
        _check_filippov(net, X[s], pd.state[s], pd.sliding[s])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(["dead", "mixed", "zeros"]),
       pull=st.sampled_from([-0.5, -0.05, 0.3]))
@example(seed=10, mode="dead", pull=-0.5)          # a tie reaching an entry outside its one window
def test_windows_pulled_up_and_down_in_one_group_settle_at_filippov_equilibria(seed, mode, pull):
    # a head of both signs: some windows of a group pull their entry up (a concave piece: the tie must hold for
    # every entry they could raise), others down; all 216 samples of 12 seeds settle, each checked here
    net = _stem(seed, mode, signed=True)
    X = np.random.default_rng(seed + 1).normal(size=(2, net.n_inputs))
    pd = sl.discord.pinned(net, X, net.forward(X) + pull)
    for s in np.flatnonzero(pd.settled):
        _check_filippov(net, X[s], pd.state[s], pd.sliding[s])


def test_levels_settle_windows_the_search_alone_leaves_cycling(monkeypatch):
    # every ReLU dead and every window pulled down: the selections cycle through the entries of each window
    net = _stem(3, "dead")
    X = np.random.default_rng(4).normal(size=(2, net.n_inputs))
    Y = net.forward(X) - 0.5
    pd = sl.discord.pinned(net, X, Y)
    assert pd.settled.all() and all(len(held) > 0 for held in pd.sliding)
    for s in range(2):
        _check_filippov(net, X[s], pd.state[s], pd.sliding[s])
    monkeypatch.setattr(filippov, "LEVELS", False)
    assert not sl.discord.pinned(net, X, Y).settled.all()


def test_a_sample_is_handed_to_the_search_once_only_dead_windows_and_oscillating_coordinates_flip():
    from sheaflinalg.network.graph.forward import evaluate
    from sheaflinalg.sheaf.matrix_free.window_levels import LevelsHandoff
    net = _stem(3, "dead")
    X = np.random.default_rng(4).normal(size=(2, net.n_inputs))
    old = {name: p.copy() for name, p in evaluate(net.graph, X).pattern.items()}
    old["relu"][:] = False                          # every ReLU dead: every window is over dead entries
    moved = {name: p.copy() for name, p in old.items()}
    moved["pool"][:, 0] = (moved["pool"][:, 0] + 1) % net.graph.sizes["relu"]     # a selection flips
    flipped = {name: p.copy() for name, p in moved.items()}
    flipped["relu"][1, -1] = True                   # and, in sample 1, a ReLU away from that window
    handoff, samples = LevelsHandoff(net.graph), np.arange(2)
    np.testing.assert_array_equal(handoff(old, moved, samples), [False, False])    # no update before it
    np.testing.assert_array_equal(handoff(moved, old, samples), [True, True])      # a dead window flips back
    np.testing.assert_array_equal(handoff(old, flipped, samples), [True, False])   # a new flip outside
    np.testing.assert_array_equal(handoff(flipped, old, samples), [True, True])    # the ReLU flips back
    np.testing.assert_array_equal(handoff(old, old, samples), [False, False])      # nothing flipped


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), side=st.integers(4, 14), equal=st.booleans())
def test_swept_levels_of_a_whole_dead_channel_meet_the_kkt_conditions(seed, side, equal):
    # 3 x 3 windows of stride 2 over a (2 side + 1)^2 plane of dead entries, all pulled down: one group of side^2
    # windows (a dead channel); the optimum is certified by non-negative multipliers found by a linear program
    from scipy.optimize import linprog
    from sheaflinalg.sheaf.matrix_free.window_levels import swept_levels
    rng = np.random.default_rng(seed)
    n_side = 2 * side + 1
    p, q, dy, dx = np.meshgrid(np.arange(side), np.arange(side), np.arange(3), np.arange(3), indexing="ij")
    rows = (p * side + q).ravel()
    entries = ((2 * p + dy) * n_side + 2 * q + dx).ravel()
    slots = (dy * 3 + dx).ravel()
    target = -rng.uniform(0.1, 1.0, side * side)
    if equal:
        target[:] = -0.5                                                # ties between windows' levels
    a, t, converged = swept_levels(rows, entries, slots, target)
    assert converged
    gap = t[rows] - a[entries]
    assert gap.min() >= -1e-13
    tight = np.flatnonzero(gap <= 1e-11)
    # weight_j a_j + sum_w mu_wj = 0 per entry, (t_w - target_w) - sum_j mu_wj = 0 per window, mu >= 0
    A = np.zeros((n_side ** 2 + side ** 2, tight.size))
    A[entries[tight], np.arange(tight.size)] = 1.0
    A[n_side ** 2 + rows[tight], np.arange(tight.size)] = -1.0
    b = np.concatenate([-a, -(t - target)])
    residual = linprog(np.zeros(tight.size), A_eq=A, b_eq=b, bounds=(0, None), method="highs")
    assert residual.status == 0                         # a feasible certificate: the sweeps found the minimum


def test_a_search_holding_more_columns_than_memory_allows_is_refused_with_what_needs_it(monkeypatch):
    from sheaflinalg._common import memory
    from sheaflinalg.sheaf.matrix_free import dead_levels
    monkeypatch.setattr(dead_levels, "_collapsible", lambda graph, u: None)     # every level held as pairs
    net = _stem(3, "dead")
    X = np.random.default_rng(4).normal(size=(2, net.n_inputs))
    monkeypatch.setattr(memory, "available_bytes", lambda: 200_000)      # the outputs' solves fit, the search's not
    with pytest.raises(memory.InsufficientMemoryError, match="holding"):
        sl.discord.pinned(net, X, net.forward(X) - 0.5)


def test_a_flipping_window_joins_its_level_with_every_entry_tied_at_its_new_maximum():
    # one channel of 5 entries, windows of 3 with stride 1: window 0 covers entries 0-2, window 1 entries 1-3, ...
    net = sl.Network.from_nodes((1, 5), [Node("relu", "relu", ["x"]), Node(
        "pool", "maxpool", ["relu"], {"kernel_size": 3, "stride": 1, "padding": 0, "dilation": 1})])
    values = {"relu": np.array([[-0.5, 0.0, 0.0, -0.5, 0.0]]), "pool": np.zeros((1, 3))}
    old = {"relu": np.zeros((1, 5), dtype=bool), "pool": np.array([[0, 3, 3]])}
    new = {"relu": old["relu"], "pool": np.array([[1, 3, 4]])}      # windows 0 and 2 flip, window 1 does not
    surface = {("relu", 0, 3)}
    filippov._join(net.graph, surface, values, old, new)
    # window 0: entry 0 joins 1 and 2 (both at its new maximum 0); window 2: entry 3 joins 2 and 4 (2 is tied with
    # its new maximum 4 too); window 1 is left alone; one group in all
    assert _groups(surface) == [{0, 1, 2, 3, 4}]
    only = {("relu", 3, 4)}                         # the windows whose pair is given: window 2 alone
    surface = {("relu", 0, 3)}
    filippov._join(net.graph, surface, values, old, new, only)
    assert _groups(surface) == [{0, 2, 3, 4}]
