"""Per-coordinate residuals and the pinned-discord analysis, against naive dense computations."""

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.naive import sheaf
from helpers.strategies import network_input_pattern
import sheaflinalg as sl


def naive_residuals(net, x, free, layout):
    """Edge discrepancies ``delta omega_bar`` of the dense coboundary (paper's definition), by edge block."""
    masks = [free[layout.free(f"z{l}")] >= 0 for l in range(1, net.n_hidden + 1)]
    sh = sheaf(net.weights, net.biases, "identity" if layout.reduced else net.output, x, masks,
               reduced=layout.reduced)
    full = np.zeros(sh["delta"].shape[1])
    full[sh["fixed"]] = sh["u"]
    full[sh["free"]] = free
    e = sh["delta"] @ full + sh["edge_offset"]
    return {b.name: e[b.slice] for b in layout.edge_blocks}


@settings(max_examples=40, deadline=None)
@given(network_input_pattern())
def test_residuals_are_the_negated_edge_discrepancies(case):
    net, x, pattern, kind = case
    rng = np.random.default_rng(0)
    for reduced in (True, False):
        lay = sl.Layout(net.dims, reduced=reduced)
        free = rng.standard_normal(lay.n_free)                 # any state, not only equilibria
        if kind == "zero_preactivations":
            free[[i for l in range(1, net.n_hidden + 1) for i in range(*lay.free(f"z{l}").indices(lay.n_free))]] = 0
        r = sl.discord.residuals(net, x[None, :], free[None, :], lay)
        ref = naive_residuals(net, x, free, lay)
        if net.output != "identity" and not reduced:
            # the naive edge is linearised at the forward pass; compare the exact output edge directly
            z = free[lay.free(f"z{net.n_hidden + 1}")]
            ref["e_y"] = free[lay.free("yhat")] - sl.network.activations.apply(net.output, z[None, :])[0]
        for name, block in zip(r.edge_names, lay.edge_blocks):
            np.testing.assert_allclose(r[name][0], -ref[block.name], rtol=1e-12, atol=1e-12)
        by_edge = r.by_edge()[0]
        np.testing.assert_allclose(by_edge.sum(), sum(0.5 * (v ** 2).sum() for v in ref.values()), rtol=1e-12)
        # active/inactive split covers every coordinate once
        for name in r.edge_names:
            act, inact = r.split(name)
            assert act.size + inact.size == r[name].size


def test_residuals_of_heat_states_sum_to_the_heat_discord():
    net = sl.Network.random([2, 12, 8, 1], seed=1)
    X = np.random.default_rng(0).uniform(-2, 2, size=(7, 2))
    res = sl.heat(net, X, seed=0, max_steps=50, progress=False)           # mid-run: discord is not zero
    r = sl.discord.residuals(net, X, res.state, res.layout)
    np.testing.assert_allclose(r.by_edge().sum(axis=1), res.discord, rtol=1e-12)
    assert np.all(r.by_edge().sum(axis=1) > 0)
    h = sl.harmonic_extension(net, X)
    assert np.abs(sl.discord.residuals(net, X, h.free).by_edge()).max() == 0.0


def exact_pinned(net, x, y, max_iter=50):
    """Naive pinned equilibrium: dense normal equations with the output stalk pinned, pattern iteration."""
    lay = sl.Layout(net.dims, reduced=True)
    out = lay.free(f"z{net.n_hidden + 1}")
    masks = [z >= 0 for z in net.forward_states(x[None, :])[0][:-1]]
    masks = [m[0] for m in masks]
    for _ in range(max_iter):
        sh = sheaf(net.weights, net.biases, "identity", x, masks, reduced=True)
        D = sh["delta"]
        cols = np.flatnonzero(sh["free"])
        fixed = np.zeros(D.shape[1])
        fixed[sh["fixed"]] = sh["u"]
        fixed[cols[out]] = y
        move = np.delete(cols, np.arange(out.start, out.stop))
        A = D[:, move]
        omega = np.linalg.solve(A.T @ A, -A.T @ (D @ fixed))
        free = np.zeros(lay.n_free)
        free[np.setdiff1d(np.arange(lay.n_free), np.arange(out.start, out.stop))] = omega
        free[out] = y
        new = [free[lay.free(f"z{l}")] >= 0 for l in range(1, net.n_hidden + 1)]
        if all(np.array_equal(a, b) for a, b in zip(new, masks)):
            return free
        masks = new
    return None


@pytest.mark.parametrize("dims,seed", [([2, 6, 1], 0), ([3, 5, 4, 1], 1), ([2, 8, 6, 4, 2], 2)])
def test_pinned_matches_a_naive_exact_solve_with_pattern_iteration(dims, seed):
    net = sl.Network.random(dims, seed=seed)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(12, dims[0]))
    Y = net.forward(X) + rng.normal(0, 0.3, size=(12, dims[-1]))
    pd = sl.discord.pinned(net, X, Y)
    assert pd.edge_names == [n for l in range(1, len(dims)) for n in (f"W{l}", f"R{l}")][:-1]
    checked = 0
    for s in range(X.shape[0]):
        ref = exact_pinned(net, X[s], Y[s])
        if ref is not None:
            np.testing.assert_allclose(pd.state[s], ref, rtol=1e-9, atol=1e-10)
            checked += 1
    assert pd.settled.all() and checked >= 6
    np.testing.assert_allclose(pd.by_edge.sum(axis=1), pd.total)
    np.testing.assert_array_equal(pd.state[:, pd.layout.free(f"z{len(dims) - 1}")], Y)


def test_switching_surface_equilibrium_by_hand():
    # x = 0, z1 = W1 x + b1 has the weight-edge pull q = 1 > 0 from below; above, the pinned
    # output y = -5 pulls a1 down so hard that q + a1 < 0: both sides push into z1 = 0 and the
    # equilibrium slides there, with a1 minimising a1^2 + (y - a1)^2: a1 = y / 2.
    net = sl.Network([np.array([[0.0]]), np.array([[1.0]])], [np.array([1.0]), np.array([0.0])])
    pd = sl.discord.pinned(net, [[0.0]], [[-5.0]])
    assert pd.settled.all() and pd.sliding == [[(1, 0)]]
    np.testing.assert_allclose(pd.state[0], [0.0, -2.5, -5.0], atol=1e-12)
    np.testing.assert_allclose(pd.by_edge[0], [0.5, 3.125, 3.125], rtol=1e-12)
    # both pure patterns are inconsistent here, so sl.complete alone cannot settle
    assert not sl.complete(net, [[0.0]], pins={"z2": [[-5.0]]}).settled


def test_sliding_equilibria_are_the_limit_of_the_euler_flow():
    net = sl.Network.random([2, 30, 1], seed=0)
    X, Y = sl.tasks.paraboloid(30, seed=0)
    pd = sl.discord.pinned(net, X, Y)
    slide = np.array([bool(s) for s in pd.sliding])
    assert slide.any() and (~slide).any() and pd.settled.all()
    errors = []
    for dt in (0.01, 0.001):
        h = sl.heat(net, X, pins={"z2": Y}, init="forward", dt=dt, tol=1e-14, max_steps=int(200 / dt),
                    progress=False)
        d = np.abs(h.state - pd.state).max(axis=1)
        assert d[~slide].max() < 1e-8              # off the surfaces: the same equilibrium
        errors.append(d[slide].max())
    assert errors[0] < 1e-2 and errors[1] < errors[0] / 3   # on them: Euler chatters, less as dt shrinks


def test_nonlinear_outputs_pin_yhat_and_the_table():
    X, _ = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 8, 3], seed=0, output="softmax")
    labels = np.arange(20) % 3
    pd = sl.discord.pinned(net, X, labels)
    assert pd.edge_names == ["W1", "R1", "W2", "out"] and pd.settled.all()
    np.testing.assert_array_equal(pd.state[:, pd.layout.free("yhat")], np.eye(3)[labels])
    table = pd.table()
    summary = pd.summary()
    assert list(summary) == ["W1", "R1", "W2", "out", "Total"]
    assert summary["Total"][0] == pytest.approx(sum(summary[e][0] for e in pd.edge_names))
    energy = pd.summary("energy")
    assert summary["R1"][0] == pytest.approx(2 * energy["R1"][0]) == pytest.approx(2 * pd.by_edge[:, 1].mean())
    assert f"{summary['Total'][0]:.4f}" in table and "20 samples" in table


def test_pinned_refuses_bad_input():
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(ValueError, match="Y has shape"):
        sl.discord.pinned(net, np.ones((3, 2)), np.ones((2, 1)))
    with pytest.raises(TypeError, match="Network"):
        sl.discord.pinned("net", np.ones((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        sl.discord.pinned(net, np.ones((3, 2)), [1.0, np.nan, 2.0])
    soft = sl.Network.random([2, 4, 3], seed=0, output="softmax")
    with pytest.raises(ValueError, match="class labels"):
        sl.discord.pinned(soft, np.ones((2, 2)), np.array([0, 3]))


def test_discord_command_and_figure(tmp_path, capsys):
    from sheaflinalg.cli import main

    net = sl.Network.random([2, 10, 1], seed=0)
    path = tmp_path / "net.npz"
    net.save(path)
    fig = tmp_path / "residuals.png"
    assert main(["discord", "--network", str(path), "--samples", "20", "--plot", str(fig)]) == 0
    out = capsys.readouterr().out
    X, Y = sl.tasks.make("paraboloid", 10, 20, seed=0).X_test, sl.tasks.make("paraboloid", 10, 20, seed=0).Y_test
    expected = sl.discord.pinned(net, X, Y).table()
    assert expected in out
    assert fig.stat().st_size > 1000
    assert main(["discord", "--steps", "500", "--samples", "10", "--no-progress", "--method", "sgd"]) == 0
    assert "sgd-trained [2, 30, 1]" in capsys.readouterr().out


def test_sl_discord_keeps_its_names():
    """``sl.discord`` became a package beside dynamics; every name it exported stays, as the same object."""
    import sheaflinalg.discord as pkg
    from sheaflinalg.discord import edge_residuals, edges, heads, node_residuals
    from sheaflinalg.discord.pinning import analysis as pinned_analysis
    from sheaflinalg.sheaf import edge_groups

    assert sl.discord is pkg
    expected = {"residuals": edge_residuals.residuals, "EdgeResiduals": edge_residuals.EdgeResiduals,
                "NodeResiduals": node_residuals.NodeResiduals,
                "pinned": pinned_analysis.pinned, "PinnedDiscord": pinned_analysis.PinnedDiscord,
                "edge_discrepancies": edges.edge_discrepancies, "discord_by_block": edges.discord_by_block,
                "group_history": edges.group_history, "group": edge_groups.group,
                "edge_kind": edge_groups.edge_kind, "edge_layer": edge_groups.edge_layer,
                "attention_blocks": heads.attention_blocks, "AttentionBlock": heads.AttentionBlock,
                "HeadDiscord": heads.HeadDiscord}
    for name, obj in expected.items():
        assert getattr(sl.discord, name) is obj, name
    assert set(pkg.__all__) == set(expected)


def test_euler_does_not_reach_the_discord_package():
    """The heat equation's modules, followed through every import (and the packages that hold them,
    which Python loads first; the package root, the API, aside), never load ``sheaflinalg.discord``."""
    from helpers.module_graph import MODULES, imported_modules, module_name

    graph = {module_name(p): imported_modules(p) for p in MODULES}
    seen, todo = set(), [m for m in graph if m.startswith("sheaflinalg.dynamics")]     # Euler and the exact flow
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parents = [".".join(m.split(".")[:i]) for i in range(2, m.count(".") + 1)]
        todo += [t for t in graph.get(m, []) + parents if t != "sheaflinalg"]
    assert "sheaflinalg.sheaf.edge_groups" in seen       # what HeatHistory groups its discord with
    assert not [m for m in seen if m.startswith("sheaflinalg.discord")]
