"""The sheaf heat equation on graph networks, and the stable step bound, against dense twins.

The bound on ``lambda_max(delta_P^T delta_P)`` must hold for every pattern: it is checked map by
map against the naive dense restriction maps (tests/helpers/naive_graph.py) and as a whole against the
assembled ``delta`` under random frozen patterns of every kind.
"""

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.graph_examples import every_op_network
from helpers.naive_graph import dense_force, node_dense
from helpers.random_graphs import graph_networks, random_graph, random_inputs, random_pattern, random_pins
import sheaflinalg as sl
from sheaflinalg.network.ops import conv as conv_rule
from sheaflinalg.sheaf.matrix_free import bound as graph_bound
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.pins.specs import parse_selector, resolve, resolve_pins


@pytest.mark.parametrize("fourier", [True, False])
@settings(max_examples=10, deadline=None)
@given(case=graph_networks())
def test_every_map_norm_bound_holds_for_random_patterns(fourier, case):
    rng = np.random.default_rng(case.seed)
    work = conv_rule.FOURIER_WORK
    conv_rule.FOURIER_WORK = work if fourier else 0.0       # False: the row/column-sum bound of convs
    try:
        for net in (case.net, every_op_network(case.seed % 5)):
            pattern = random_pattern(net, rng, 1)
            for node in net.graph.nodes:
                bound = graph_bound.map_norm_bound(node, net.graph)
                rows = pattern[node.name][0] if node.name in pattern else None
                for _, F in node_dense(node, net.graph, rows)[0]:
                    assert np.linalg.norm(F, 2) <= bound * (1 + 1e-12) + 1e-12, (node.name, node.op)
    finally:
        conv_rule.FOURIER_WORK = work


def _check_lambda_max_bound(net, X, patterns, gamma=0.0, lam=0.0):
    bound = sl.lambda_max_bound(net, gamma_max=gamma, reluctance=lam)
    for pattern in patterns:
        D = sl.assemble(net, X, pattern=pattern, reduced=False).delta_free
        lam_max = spla.eigsh((D.T @ D).tocsc(), k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0]
        assert lam_max + gamma + lam <= bound * (1 + 1e-9), (lam_max, bound)


@settings(max_examples=15, deadline=None)
@given(case=graph_networks(outputs=("identity", "sigmoid", "softmax")), gamma=st.floats(0, 2), lam=st.floats(0, 2))
def test_lambda_max_bound_holds_for_random_patterns(case, gamma, lam):
    net, seed, mode = case
    X = random_inputs(net, seed, 1, mode).reshape(1, -1)
    _check_lambda_max_bound(net, X, [None, random_pattern(net, np.random.default_rng(seed), 1)], gamma, lam)


def test_lambda_max_bound_holds_on_every_op():
    net = every_op_network(1, "softmax")
    rng = np.random.default_rng(1)
    _check_lambda_max_bound(net, rng.normal(size=(1, 72)), [None] + [random_pattern(net, rng, 1) for _ in range(3)])


def test_conv_bound_is_the_circular_norm_when_nothing_is_cut():
    # stride 1, "same" padding of a 1-D map: a Toeplitz submatrix of the circulant; its norm is close
    W = np.random.default_rng(0).normal(size=(3, 2, 3))
    conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                   {"weight": W, "bias": np.zeros(3)})
    net = sl.Network.from_nodes((2, 40), [conv, sl.Node("r", "relu", ["c"])])
    (_, F), = node_dense(conv, net.graph, None)[0]
    exact, bound = np.linalg.norm(F, 2), graph_bound.map_norm_bound(conv, net.graph)
    assert exact <= bound <= 1.01 * exact


@settings(max_examples=15, deadline=None)
@given(case=graph_networks(outputs=("identity", "sigmoid", "softmax"), max_layers=3), reduced=st.booleans())
def test_one_euler_step_equals_the_dense_step(case, reduced):
    net, seed, mode = case
    output = net.output
    reduced = reduced and output == "identity"
    rng = np.random.default_rng(seed)
    M = 2
    X = random_inputs(net, seed, M, mode).reshape(M, -1)
    lay = Layout.from_graph(net.graph, reduced=reduced)
    pins, soft, lam = random_pins(net, lay, rng, M)
    S0 = sl.harmonic_extension(net, X).free[:, :lay.n_free] + rng.normal(size=(M, lay.n_free))
    bound = sl.lambda_max_bound(net)        # inf with a product of two values: one step checks the force only
    alpha, dt = 0.7, 0.5 / bound if np.isfinite(bound) else 0.01
    res = sl.heat(net, X, alpha=alpha, dt=dt, max_steps=1, init=S0, pins=pins, soft_pins=soft, reluctance=lam,
                  reduced=reduced, progress=False, check_stability=bool(np.isfinite(bound)))
    resolved = resolve_pins(net, X, lay, pins, soft, lam)
    S0[:, resolved.hard.index] = resolved.hard.values
    F = dense_force(net, lay, X, S0, reduced)
    if resolved.soft.size:
        F[:, resolved.soft.index] += resolved.soft.gamma * (resolved.soft.values - S0[:, resolved.soft.index])
    if lam:
        F += lam * (0.0 - S0)
    F[:, resolved.hard.index] = 0.0
    np.testing.assert_allclose(res.state, S0 + alpha * dt * F, rtol=1e-12, atol=1e-12)
    assert res.steps == 1 and res.final_change == pytest.approx(alpha * dt * np.abs(F).max(), rel=1e-12)


# Fixed seeds of every pattern kind whose flows settle within 3000 steps at the largest stable dt
# (deep concatenations can be ill-conditioned enough to need many more).
@pytest.mark.parametrize("seed,mode", [(0, "mixed"), (8, "mixed"), (1, "active"), (5, "active"), (2, "dead"),
                                       (10, "dead"), (3, "ties"), (11, "ties")])
def test_heat_converges_to_the_forward_pass(seed, mode):
    net = random_graph(seed, mode)
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    res = sl.heat(net, X, dt=1.9 / sl.lambda_max_bound(net), max_steps=3000, tol=1e-11, seed=seed, progress=False)
    assert res.converged and res.steps < 3000
    np.testing.assert_allclose(res.output, net.forward(X), atol=1e-7)
    np.testing.assert_allclose(res.state, sl.harmonic_extension(net, X).free[:, :res.layout.n_free], atol=1e-7)
    assert np.all(res.discord < 1e-14)


def test_channel_selectors_and_node_shaped_values():
    net = every_op_network()
    lay = Layout.from_graph(net.graph, reduced=True)
    start = lay.free("conv1").start
    assert parse_selector(lay, "conv1[channel=1]").tolist() == list(range(start + 36, start + 72))
    assert parse_selector(lay, "conv1[channel=1:3]").tolist() == list(range(start + 36, start + 108))
    assert parse_selector(lay, "conv1[channel=3,0]").tolist() == \
        list(range(start + 108, start + 144)) + list(range(start, start + 36))
    maps = np.arange(2 * 36.0).reshape(2, 6, 6)
    for spec, expected in [({"conv1[channel=0,2]": maps}, maps.ravel()),
                           ({"conv1[channel=2]": maps[0]}, maps[0].ravel()),
                           ({"fc[channel=1]": 5.0}, [5.0]),
                           ({"conv1": np.stack([maps, maps]).reshape(1, 4, 6, 6)}, np.stack([maps, maps]).ravel())]:
        got = resolve(lay, spec, 1)
        np.testing.assert_array_equal(got.values[0][np.argsort(np.argsort(parse_selector(lay, *spec)))], expected)
    per_sample = resolve(lay, {"pool": np.arange(3 * 36.0).reshape(3, 4, 3, 3)}, 3)
    np.testing.assert_array_equal(per_sample.values, np.arange(3 * 36.0).reshape(3, 36))


@pytest.mark.parametrize("spec,message", [
    ({"conv1": np.zeros((4, 6, 5))}, r"the shape \(4, 6, 6\) of the selected node or channels or \(2, 4, 6, 6\); "
                                     r"got \(4, 6, 5\)"),
    ({"conv1[channel=0,1]": np.zeros((4, 6, 6))}, r"shape \(2, 6, 6\) of the selected node"),
    ({"conv1[channel=4]": 0.0}, r"channels of node 'conv1' of shape \(4, 6, 6\) out of range \[0, 4\)"),
    ({"conv1[channel=x]": 0.0}, "must be integers"),
    ({"conv1[channel=1,1]": 0.0}, "repeats a coordinate"),
    ({"conv_1[channel=1]": 0.0}, "did you mean 'conv1'"),
])
def test_bad_channel_pins_are_refused_with_the_node_shape(spec, message):
    with pytest.raises(ValueError, match=message):
        sl.heat(every_op_network(), np.zeros((2, 72)), pins=spec, max_steps=1, progress=False)


def test_channel_selectors_refuse_chain_blocks():
    with pytest.raises(ValueError, match="channel selectors take a graph network's node"):
        sl.complete(sl.Network.random([2, 3, 1], seed=0), np.zeros((1, 2)), pins={"a1[channel=0]": 0.0})


def test_complete_imputes_missing_inputs_from_clamped_channels():
    net = every_op_network(2)
    X = np.random.default_rng(2).normal(size=(2, 72))
    missing = np.array([0, 7, 14, 40, 41, 71])           # entries of both input channels
    known = sl.harmonic_extension(net, X).node("conv1")[:, :108].reshape(2, 3, 6, 6)
    damaged = X.copy()
    damaged[:, missing] = 0.0
    done = sl.complete(net, damaged, pins={"conv1[channel=0:3]": known}, free_inputs=missing)
    assert done.settled and done.unique
    np.testing.assert_allclose(done.inputs, X, atol=1e-9)
    np.testing.assert_allclose(done.block("conv1")[:, :108], known.reshape(2, -1), atol=0)
    np.testing.assert_allclose(done.output, net.forward(X), atol=1e-8)


@pytest.mark.parametrize("seed,mode", [(5, "active"), (9, "active"), (10, "dead"), (11, "ties"), (12, "mixed")])
def test_pinned_heat_reaches_the_pinned_equilibrium(seed, mode):
    net = random_graph(seed, mode)
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    first, last = net.graph.nodes[0].name, net.graph.output_node
    pins = {f"{first}[channel=0]": 0.25}
    soft = ({f"{last}[0]": 1.5}, 2.0)
    common = dict(pins=pins, soft_pins=soft, reluctance=0.1)
    done = sl.complete(net, X, **common)
    assert done.settled
    res = sl.heat(net, X, dt=1.9 / sl.lambda_max_bound(net, 2.0, 0.1), max_steps=20000, tol=1e-12, init="forward",
                  progress=False, **common)
    assert res.converged
    np.testing.assert_allclose(res.state, done.state, atol=1e-8)
    np.testing.assert_allclose(res.discord, done.discord, rtol=1e-6, atol=1e-12)


def test_records_and_crossings():
    net = random_graph(9, "active")
    X = random_inputs(net, 9, 3, "active").reshape(3, -1)
    res = sl.heat(net, X, dt=1.9 / sl.lambda_max_bound(net, 1.0, 0.05), max_steps=2000, tol=1e-11, seed=4, record_every=50,
                  record_states=[2], soft_pins=({"head[0]": 0.5}, 1.0), reluctance=0.05, progress=False)
    h = res.history
    n_rec = len(h.steps)
    assert h.steps[0] == 0 and h.steps[-1] == res.steps and np.all(np.diff(h.steps) > 0)
    assert h.labels == [b.name for b in res.layout.edge_blocks] + ["e_pin", "e_rel"]
    assert h.discord.shape == (n_rec, len(h.labels)) and h.output.shape == (n_rec, 3, net.n_outputs)
    np.testing.assert_allclose(h.sample_discord[-1], res.discord, rtol=1e-12)
    np.testing.assert_allclose(h.discord[-1].sum(), res.discord.sum(), rtol=1e-12)
    np.testing.assert_array_equal(h.states[-1, 0], res.state[2])
    np.testing.assert_array_equal(h.output[-1], res.output)
    log = res.crossings
    assert res.crossings_total == len(log) > 0 and res.sliding is None
    assert np.all(np.diff(log[:, 0]) >= 0)
    relu = [k + 1 for k, n in enumerate(net.graph.nodes) if n.op == "relu"]
    assert set(log[:, 2]) <= set(relu) and set(log[:, 4]) <= {0, 1}
    # replaying the states around a crossing shows the sign change of the relu's parent entry
    step, s, layer, entry, new = log[0]
    parent = net.graph.nodes[layer - 1].inputs[0]
    before = sl.heat(net, X, dt=res.dt, max_steps=step - 1, tol=0.0, seed=4, soft_pins=({"head[0]": 0.5}, 1.0),
                     reluctance=0.05, progress=False).block(parent)[s, entry]
    after = sl.heat(net, X, dt=res.dt, max_steps=step, tol=0.0, seed=4, soft_pins=({"head[0]": 0.5}, 1.0),
                    reluctance=0.05, progress=False).block(parent)[s, entry]
    assert (before >= 0) != (after >= 0) and (after >= 0) == bool(new)
    capped = sl.heat(net, X, dt=res.dt, max_steps=2000, tol=1e-11, seed=4, soft_pins=({"head[0]": 0.5}, 1.0),
                     reluctance=0.05, progress=False, max_crossings=2)
    np.testing.assert_array_equal(capped.crossings, log[:2])
    assert capped.crossings_total == res.crossings_total


def test_the_result_does_not_depend_on_threads(monkeypatch):
    from sheaflinalg.network.graph import forward
    monkeypatch.setattr(forward, "BLOCK_WORK", 1)          # several sample blocks for a small batch
    net = every_op_network(3, "sigmoid")
    X = np.random.default_rng(3).normal(size=(7, 72))
    runs = [sl.heat(net, X, dt=0.02, max_steps=30, seed=1, threads=t, record_every=10, progress=False)
            for t in (1, 2, 3)]
    assert len(forward.sample_blocks(net.graph, 7)) == 5
    for other in runs[1:]:
        np.testing.assert_array_equal(other.state, runs[0].state)
        np.testing.assert_array_equal(other.crossings, runs[0].crossings)
        np.testing.assert_array_equal(other.history.discord, runs[0].history.discord)


def test_graph_refusals():
    net = every_op_network()
    X = np.zeros((1, 72))
    with pytest.raises(sl.GraphNetworkError, match="use method='euler'"):
        sl.heat(net, X, method="exact")
    largest = 2.0 / sl.lambda_max_bound(net)
    with pytest.raises(ValueError, match=f"the largest stable dt is {largest:.6g}"):
        sl.heat(net, X, dt=1.01 * largest)
    with pytest.raises(sl.NonFiniteStateError, match="at Euler step"):
        sl.heat(net, X, dt=50 * largest, check_stability=False, max_steps=100000, progress=False)
    with pytest.raises(ValueError, match=r"X has 71 features per sample but the network takes 72"):
        sl.heat(net, np.zeros((1, 71)))


def test_heat_and_verify_commands_take_graph_network_files(tmp_path, capsys):
    from sheaflinalg.cli import main
    path, history = tmp_path / "g.npz", tmp_path / "h.npz"
    net = random_graph(9, "active")
    net.save(str(path))
    dt = str(1.9 / sl.lambda_max_bound(net))
    assert main(["heat", "--network", str(path), "--no-progress", "--samples", "2", "--dt", dt, "--tol", "1e-11",
                 "--save-history", str(history)]) == 0
    out = capsys.readouterr().out
    assert "network graph of 8 nodes, input (2, 3, 3)" in out and "converged: True" in out
    assert float(out.split("max |output - forward pass|: ")[1].split()[0]) < 1e-8
    assert "final discord, largest 5 edges: e_" in out and "sliding episodes are not detected" in out
    with np.load(history, allow_pickle=False) as f:
        assert list(f["labels"]) == [f"e_{n.name}" for n in net.graph.nodes] and "sliding" not in f.files
        X = np.random.default_rng(0).uniform(-2, 2, size=(2, net.n_inputs))
        np.testing.assert_allclose(f["output"], net.forward(X), atol=1e-8)
    first = net.graph.nodes[0].name
    assert main(["heat", "--network", str(path), "--no-progress", "--dt", dt, "--max-steps", "10",
                 "--pin", f"{first}[channel=1]=0.5"]) == 1
    assert f"pinned: {first}[9], {first}[10]," in capsys.readouterr().out
    assert main(["verify", "--network", str(path), "--samples", "2"]) == 0
    assert "RESULT: PASSED" in capsys.readouterr().out


def test_a_graph_histories_discord_groups_by_node_op_and_position():
    net = every_op_network()
    X = np.random.default_rng(0).normal(size=(2, 72))
    hist = sl.heat(net, X, dt=1.0 / sl.lambda_max_bound(net), max_steps=20, record_every=10, progress=False).history
    ops = {f"e_{node.name}": node.op for node in net.graph.nodes}
    for op in set(ops.values()):
        columns = [j for j, label in enumerate(hist.labels) if ops.get(label) == op]
        np.testing.assert_array_equal(hist.by_type()[op], hist.discord[:, columns].sum(axis=1))
    by_layer = hist.by_layer()
    assert sorted(by_layer) == list(range(1, len(net.graph.nodes) + 1))
    np.testing.assert_allclose(sum(by_layer.values()), hist.total, rtol=1e-14)
    assert sl.discord.group_history(hist, by="type").keys() == hist.by_type().keys()
