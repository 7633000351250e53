"""The ViT case study: the model and its grouping of nodes by sub-layer and head, the per-head sums of the analysis
against the per-node ones, and the computed properties of the quick reproduction's outputs (run once for the
suite by the installed wheel, conftest.py)."""

import csv
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.reproduce import case_report, case_vit, mnist1d_vit
from sheaflinalg.discord.pinning.targets import relabelled
from sheaflinalg.reproduce.case_analysis import along, analyse, auc

QUICK = case_vit.SETTINGS[True]


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def case(quick_reproduction):
    """The quick reproduction's output folder, its per-input rows and its summary ``{quantity: value}``."""
    tables = quick_reproduction / "tables"
    summary = {r["quantity"]: r["value"] for r in _rows(tables / "case_vit_summary.csv")}
    return quick_reproduction, _rows(tables / "case_vit_inputs.csv"), summary


@pytest.fixture(scope="module")
def vit():
    """An untrained ViT (seeded) imported, and a few MNIST-1D test signals."""
    torch = pytest.importorskip("torch")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = mnist1d_vit.build(torch, torch.nn).eval()
    return sl.Network.from_torch(model, input_shape=(1, 40)), sl.tasks.mnist1d(n_samples=60)


def test_the_trained_vit_beats_chance_and_is_certified(case):
    out, inputs, summary = case
    assert float(summary["test accuracy (imported network, all test inputs)"]) > 0.2       # chance: 0.1
    passed, verified = summary["certified inputs (det = 1 and harmonic = forward)"].split("/")
    assert passed == verified and int(verified) == QUICK.n_verify
    net = sl.Network.load(out / "networks" / "mnist1d_vit_quick.npz")
    assert net.is_graph and net.output == "identity"
    assert {"softmax", "matmul", "layernorm", "gelu"} <= {node.op for node in net.graph.nodes}
    data = sl.tasks.mnist1d(seed=case_report.DATA_SEED, n_samples=QUICK.n_samples)
    index = [int(r["test_index"]) for r in inputs]
    assert net.forward(data.X_test[index]).argmax(axis=1).tolist() == [int(r["predicted"]) for r in inputs]
    assert data.Y_test[index].argmax(axis=1).tolist() == [int(r["label"]) for r in inputs]
    record = json.loads((out / "networks" / "mnist1d_vit_quick.npz.json").read_text())
    assert len(record["train_loss"]) == QUICK.protocol.epochs


def test_spectra_energies_and_discord_of_the_analysed_inputs(case):
    out, inputs, summary = case
    wrong = [r for r in inputs if r["label"] != r["predicted"]]
    assert wrong and len(wrong) < len(inputs)
    for r in inputs:
        assert 0 < float(r["lambda_min"]) <= 1 <= float(r["lambda_max"])          # det L = 1
        energy = [float(v) for k, v in r.items() if k.startswith("energy_")]
        assert min(energy) >= 0 and sum(energy) == pytest.approx(1, abs=1e-8)
    pinned = [r for r in inputs if r["pinned_discord"]]
    assert pinned == wrong[:QUICK.n_pinned] and all(float(r["pinned_discord"]) > 0 for r in pinned)
    settled = [r for r in pinned if r["pinned_settled"] == "1"]
    assert summary["pinned equilibria settled (the first misclassified inputs)"] == f"{len(settled)}/{len(pinned)}"
    stages = _rows(out / "tables" / "case_vit_stages.csv")
    assert [r["sub-layer"] for r in stages] == ["embedding", "block 0 attention", "block 0 MLP", "block 1 attention",
                                                "block 1 MLP", "head"]
    if settled:                         # the sub-layers' shares of the pinned discord add up to all of it
        assert sum(float(r["share of the pinned discord"]) for r in stages) == pytest.approx(1)
    heads = _rows(out / "tables" / "case_vit_heads.csv")
    assert {r["head"] for r in heads} == {str(h) for h in range(mnist1d_vit.HEADS)}
    assert {r["nodes"] for r in heads} == {f"block {b} {p}" for b in range(mnist1d_vit.DEPTH)
                                           for p in ("q", "k", "v", "scores", "softmax", "P V")}


def test_stages_and_parts_cover_every_node_in_order(vit):
    net, _ = vit
    stages = mnist1d_vit.stages(net.graph)
    assert sum(stages.values(), []) == [node.name for node in net.graph.nodes]
    assert stages["embedding"][0] == "embed" and stages["head"][-1] == "head"
    stage_of = {n: s for s, nodes in stages.items() for n in nodes}
    rows = case_vit.head_rows(net.graph, stage_of)
    assert sum(len(v) for v in rows.values()) == len(case_vit._groups(net.graph)) == 2 * 6
    assert rows["block 0 scores"] == ["scaled_dot_product_attention.scores"]
    assert rows["block 1 softmax"] == ["scaled_dot_product_attention_1.weights"]
    assert rows["block 0 k"] == ["scaled_dot_product_attention.keys"]      # K^T, the scores' second factor
    assert rows["block 0 q"] == ["transpose_1"] and rows["block 1 P V"] == ["scaled_dot_product_attention_1"]


def test_per_head_sums_add_up_to_the_nodes_energy_and_discord(vit):
    net, data = vit
    a = analyse(net, data.X_test, data.Y_test, np.arange(4), n_pinned=1, groups=case_vit._groups, max_iter=5)
    assert len(a.channel_energy) == 2 * 6     # per block: q, k (K^T), v, scores, softmax, P V
    for name, e in a.channel_energy.items():
        assert e.shape == (4, mnist1d_vit.HEADS)
        np.testing.assert_allclose(e.sum(axis=1), a.energy[:, a.nodes.index(name)], rtol=1e-12)
        d = a.channel_discord[name]
        np.testing.assert_allclose(d.sum(axis=1), a.discord[:, a.edges.index(name)], rtol=1e-12, atol=1e-300)
    # the heads' values are the node's own coordinates: head h of a (heads, tokens, features) value is a block
    sp = sl.spectrum(net, data.X_test[:4], progress=False)
    name = "scaled_dot_product_attention_1"
    np.testing.assert_allclose(a.channel_energy[name][1], (sp.node_vector(name, sample=1) ** 2).sum(axis=(1, 2)),
                               rtol=1e-8)
    # the case study's discord per head is the library's (NodeResiduals.per_head), node by node
    X, logits = data.X_test[a.index[a.pinned]], net.forward(data.X_test[a.index])[a.pinned]
    pd = sl.discord.pinned(net, X, relabelled(logits, a.labels[a.pinned]), max_iter=5, progress=False)
    heads = pd.residuals.per_head().values
    assert sorted(n for per in heads.values() for n in per) == sorted(a.channel_discord)
    for per in heads.values():
        for name, d in per.items():
            np.testing.assert_allclose(a.channel_discord[name], d, rtol=1e-12, atol=1e-300)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 31), st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 3))
def test_along_sums_squares_over_the_other_axes(seed, shape, axis):
    axis = axis % len(shape)
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(3, *shape))
    got = along(v.reshape(3, -1), tuple(shape), axis)
    for g in range(shape[axis]):
        np.testing.assert_allclose(got[:, g], [np.sum(np.take(v[m], g, axis=axis) ** 2) for m in range(3)])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=8), st.lists(st.integers(0, 5), min_size=1, max_size=8))
def test_auc_is_the_mann_whitney_statistic(p, q):
    stats = pytest.importorskip("scipy.stats")
    u = stats.mannwhitneyu(p, q, alternative="two-sided").statistic
    assert auc(p, q) == pytest.approx(u / (len(p) * len(q)))
    assert auc(p, q) + auc(q, p) == pytest.approx(1)
    assert np.isnan(auc([], q))
