"""switching.check_surfaces against the dense coboundary: a coordinate at exactly z = 0 under the inactive side.

The one-sided forces on a coordinate ``z_j = 0`` are the dense energy's ``-gradient`` under the pattern read off
the state (``z >= 0`` active) and under the same pattern with ``j`` inactive (tests/helpers/naive_graph.py);
the coordinate slides when the active side pushes down and the inactive side does not push down, is left
alone when the active side is at rest, and is pushed off the surface (its sample not settled, its pattern set
to the side it is pushed to, and none of its coordinates reported sliding) otherwise.
"""

import itertools

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from helpers.naive_graph import coboundary
from helpers.random_graphs import CNN_STEPS, MODES, graph_networks, random_inputs, random_pattern
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf
from sheaflinalg.network.graph.nodes import INPUT
from sheaflinalg.sheaf.matrix_free.switching import check_surfaces, forward_pattern, forward_ties, read_pattern
from sheaflinalg.sheaf.patterns import graph_pattern


def _network(rng):
    """``x -> fc (zero weights and bias) -> r (ReLU) -> head``: the forward pass has ``fc = 0`` exactly."""
    fc = Node("fc", "linear", ["x"], params={"weight": np.zeros((4, 2)), "bias": np.zeros(4)})
    head = Node("head", "linear", ["r"], params={"weight": rng.normal(size=(2, 4)), "bias": rng.normal(size=2)})
    return sl.Network.from_nodes((2,), [fc, Node("r", "relu", ["fc"]), head])


def _one_sided(graph, lay, x, w, j):
    """``(f_above, f_below)`` on ``fc[j]`` from the dense coboundary (the pinned output's force dropped)."""
    forces = []
    for active in (True, False):
        pattern = {"r": w[lay.free("fc")] >= 0}
        pattern["r"][j] = active
        delta, c, _ = coboundary(graph, lay, x, pattern, reduced=True)
        c[lay.free_index] = w
        forces.append(-(delta[:, lay.free_index].T @ (delta @ c))[lay.free("fc").start + j])
    return forces


def test_coordinates_left_at_zero_by_the_inactive_side_slide_or_are_pushed_as_the_dense_forces_say():
    rng = np.random.default_rng(5)
    net = _network(rng)
    graph, lay = net.graph, Layout.from_graph(net.graph, reduced=True)
    X = rng.normal(size=(3, 2))
    r = np.array([[-1.0, -0.5, -2.0, -0.1], [-1.0, 0.7, 0.0, -0.3], [0.2, 0.4, 0.0, 1.5]])
    state = np.concatenate([np.zeros((3, 4)), r, rng.normal(size=(3, 2))], axis=1)
    values = {name: state[:, lay.free(name)] for name in ("fc", "r", "head")}
    pattern = {"r": np.zeros((3, 4), dtype=bool)}            # solved under the inactive side
    settled, sliding = np.ones(3, dtype=bool), [[] for _ in range(3)]
    sheaf = GraphSheaf(graph)

    def forces(v):
        res = sheaf.residuals(X, v)
        force = sheaf.force(res)
        force["head"] = np.zeros_like(force["head"])        # the pinned output
        return res.edges, force

    found = check_surfaces(sheaf, X, values, pattern, settled, sliding, forces, 1e-10)
    expected_sliding, expected_settled = [[] for _ in range(3)], np.ones(3, dtype=bool)
    for s in range(3):
        for j in range(4):
            above, below = _one_sided(graph, lay, X[s], state[s], j)
            if abs(above) <= 1e-9:
                assert not pattern["r"][s, j]
            elif above < 0 <= below + 1e-9:
                expected_sliding[s].append(("fc", j))
            else:
                expected_settled[s] = False
                assert pattern["r"][s, j] == (above > 0)
    expected_sliding = [held if expected_settled[s] else [] for s, held in enumerate(expected_sliding)]
    assert sliding == expected_sliding and found == sum(map(len, expected_sliding))
    np.testing.assert_array_equal(settled, expected_settled)
    assert any(expected_sliding) and not expected_settled.all()     # the example has both cases


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), n_windows=st.integers(1, 4))
def test_a_group_over_overlapping_windows_slides_exactly_when_convex_weights_balance_it(seed, n_windows):
    from sheaflinalg.sheaf.matrix_free.window_ties import group_slides
    rng = np.random.default_rng(seed)
    n = 3 * n_windows + 1
    members = np.zeros((n_windows, n), dtype=bool)
    for w in range(n_windows):              # window w covers entries 3w .. 3w + 3: neighbours share one
        members[w, 3 * w:3 * w + 4] = True
    pulls = -rng.uniform(0.5, 2.0, n_windows)
    weights = rng.uniform(0.1, 1.0, (n_windows, n)) * members
    weights /= weights.sum(axis=1, keepdims=True)
    c = rng.normal()
    F = c - pulls @ weights                 # every entry's net force is c: a sliding group by construction
    assert group_slides(F, pulls, members, 1e-9)[0]
    F[rng.integers(n)] -= 10.0              # one entry pushed far down: no convex weights reach it
    slides, short, choice = group_slides(F, pulls, members, 1e-9)
    assert not slides and short.any() and choice is None


def _tie_margin(F, pulls, members):
    """The least directional derivative of a tie's local energy along the indicator of a subset of its entries.

    With the group's common force ``c`` taken out, the derivative along ``d`` is
    ``phi(d) = -sum_j (F_j - c) d_j - sum_w pulls[w] max_{j in w} d_j``, piecewise linear and positively
    homogeneous: on each cone of one ordering of ``d`` it is linear, and the cone is spanned by ``+-1`` and the
    indicators of its top entries.  So the tie is a local minimum exactly when ``phi(1_S) >= 0`` for every
    subset ``S``: this returns the least of them."""
    n = F.size
    c = (F.sum() + pulls.sum()) / n
    margins = []
    for k in range(1, n):
        for S in itertools.combinations(range(n), k):
            d = np.zeros(n)
            d[list(S)] = 1.0
            margins.append(-(F - c) @ d - pulls @ (members @ d > 0))
    return min(margins)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 5), n_windows=st.integers(1, 4))
def test_a_group_slides_exactly_when_no_subset_of_its_entries_leaves_the_tie_downhill(seed, n, n_windows):
    # windows pulling up or down on a group of tied entries, against the local energy's directional derivatives
    from sheaflinalg.sheaf.matrix_free.window_ties import group_slides
    rng = np.random.default_rng(seed)
    members = rng.random((n_windows, n)) < 0.6
    members[np.arange(n_windows), rng.integers(n, size=n_windows)] = True       # every window has a member
    pulls = rng.normal(size=n_windows)
    F = rng.normal(size=n) * rng.integers(0, 2)             # often equal forces, as on dead entries
    margin = _tie_margin(F, pulls, members)
    assume(abs(margin) > 1e-6)
    slides, _, choice = group_slides(F, pulls, members, 1e-9)
    assert slides == (margin > 0)
    if not slides and choice is not None:           # the failing selection raises one member of each up window
        up = pulls > 1e-9
        assert np.all(members[np.flatnonzero(up), choice[up]]) and np.all(choice[~up] == -1)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_groups=st.integers(1, 12))
def test_many_groups_tested_in_one_linear_problem_get_each_its_own_verdict(seed, n_groups):
    # the release test puts every group's balance problems into one linear problem: each verdict must be the
    # exact one (the subset margins) whatever the other groups are, scales apart by orders of magnitude
    from sheaflinalg.sheaf.matrix_free.window_ties import groups_slide
    rng = np.random.default_rng(seed)
    groups, margins = [], []
    while len(groups) < n_groups:
        n, n_windows = rng.integers(2, 6), rng.integers(1, 4)
        members = rng.random((n_windows, n)) < 0.6
        members[np.arange(n_windows), rng.integers(n, size=n_windows)] = True
        scale = 10.0 ** rng.integers(-3, 4)
        pulls, F = scale * rng.normal(size=n_windows), scale * rng.normal(size=n) * rng.integers(0, 2)
        margin = _tie_margin(F, pulls, members)
        if abs(margin) > 1e-6 * scale:
            tol = 1e-9 * (1.0 + np.abs(pulls).max() + np.abs(F).max())
            groups.append((F, pulls, members, tol))
            margins.append(margin)
    verdicts = groups_slide(groups)
    assert [v[0] for v in verdicts] == [m > 0 for m in margins]
    for group, (slides, short, choice) in zip(groups, verdicts):
        alone = groups_slide([group])[0]
        assert slides == alone[0] and (choice is None) == (alone[2] is None)


@settings(max_examples=25)
@given(case=graph_networks(modes=MODES))
def test_the_forward_pattern_kept_with_the_ties_is_the_pattern_read_off_their_values(case):
    # iterate_pattern starts from the pattern forward_ties' pass wrote instead of reading the windows again:
    # the same masks and selections (ties: the first maximum; exact zeros: active) on every node kind
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    tied = forward_ties(net.graph, X)
    kept, read = forward_pattern(net.graph, tied), graph_pattern(net.graph, tied)
    assert set(kept) == set(read) == set(net.graph.pattern_nodes)
    for name in read:
        np.testing.assert_array_equal(kept[name], read[name])
        assert kept[name] is not tied.pattern[name]         # a copy: iterate_pattern changes it in place
    assert forward_pattern(net.graph, dict(tied)).keys() == read.keys()


def _decided_windows(z, f, previous, index, n_in, rtol=1e-12):
    """The selections read off ``z`` with the forward ties decided, window by window from the rules of
    switching.read_pattern: the first maximum of ``z``, the previous selection kept while it is a maximum up to
    rounding, and given back where the read one was tied with it at the forward values ``f`` and ``z`` moved
    the previous one down."""
    out = np.empty_like(previous)
    for s in range(z.shape[0]):
        keep, tie = rtol * max(1.0, np.abs(z[s]).max()), rtol * max(1.0, np.abs(f[s]).max())
        for o in range(previous.shape[1]):
            window = [(o // index.shape[0]) * n_in + i for i in index[o % index.shape[0]] if i >= 0]
            read = window[int(np.argmax(z[s, window]))]
            old = previous[s, o]
            if z[s, old] >= z[s, read] - keep:
                read = old
            if abs(f[s, read] - f[s, old]) <= tie and z[s, old] < f[s, old]:
                read = old
            out[s, o] = read
    return out


@settings(max_examples=40)
@given(case=graph_networks(modes=("ties", "dead", "mixed"), steps=CNN_STEPS, axes=(1, 2)),
       moved=st.sampled_from([0.0, 1e-13, 1e-6]))
def test_the_selections_read_off_a_solution_decide_the_forward_ties_window_by_window(case, moved):
    # the selections of read_pattern (one compiled pass per max-pool) against the rules written per window, at
    # solutions that leave the forward values where they were, move them within rounding, or by a response;
    # previous selections from the forward pass and at random in their windows
    net, seed, mode = case
    rng = np.random.default_rng(seed)
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    tied = forward_ties(net.graph, X)
    values = {name: v + moved * rng.integers(-1, 2, size=v.shape) * (1.0 + np.abs(v))
              for name, v in tied.items() if name != INPUT}
    for previous in (forward_pattern(net.graph, tied), random_pattern(net, rng, 3)):
        new = read_pattern(net.graph, X, values, previous, tied)
        for node in (net.graph.node(name) for name in net.graph.pattern_nodes):
            if node.op == "maxpool":
                _, n_in, index, _ = node.rule.windows(node, net.graph)
                u = node.inputs[0]
                z = X if u == INPUT else values[u]
                np.testing.assert_array_equal(new[node.name],
                                              _decided_windows(z, tied[u], previous[node.name], index, n_in))
