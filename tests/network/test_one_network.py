"""One network type: user node names kept in every label, graph-wide members, no name collisions (issues 30, 31).

Names a user (or an imported model) chooses never collide with the names the sheaf makes: ``e_y`` (the output
edge), ``e_pin`` (soft pins), ``e_rel`` (reluctance) and ``yhat``; the nodes ``y``, ``pin``, ``rel`` are refused
and the importers rename them (``y`` -> ``y_``).
"""

import warnings

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.network.graph import Graph, Node

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402


class _Named(nn.Module):
    """conv -> relu -> flatten -> linear (-> sigmoid if ``squash``), the linear layer stored as ``last``."""

    def __init__(self, last, seed=0, squash=False):
        super().__init__()
        self.squash = squash
        torch.manual_seed(seed)
        self.conv = nn.Conv1d(1, 2, 3)
        self.act = nn.ReLU()
        self.flat = nn.Flatten()
        setattr(self, last, nn.Linear(2 * 4, 2))
        self.last = last
        self.double().eval()

    def forward(self, x):
        out = getattr(self, self.last)(self.flat(self.act(self.conv(x))))
        return torch.sigmoid(out) if self.squash else out


def _data(n=5, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1, 6)), rng.normal(size=(n, 2))


@pytest.mark.parametrize("name", ["y", "pin", "rel", "x", "yhat"])
def test_reserved_node_names_are_refused_naming_the_reserved_ones(name):
    with pytest.raises(ValueError, match=rf"node name '{name}' is not allowed.*'yhat' or 'y' or 'pin' or 'rel'"):
        Node(name, "relu", ["x"])


@pytest.mark.parametrize("squash", [False, True])
def test_pinned_discord_energy_is_invariant_under_renaming_a_node_out_to_y(squash):
    X, Y = _data()
    if squash:
        Y = 1.0 / (1.0 + np.exp(-Y))
    energies = {}
    for name in ("out", "y"):
        net = sl.Network.from_torch(_Named(name, squash=squash), input_shape=(1, 6))
        assert net.graph.output_node == ("y_" if name == "y" else "out")
        energies[name] = sl.discord.pinned(net, X, Y).total
    assert np.all(energies["out"] > 0)
    np.testing.assert_array_equal(energies["y"], energies["out"])


def test_verify_passes_on_an_onnx_model_whose_output_is_called_y(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    arrays = {"W1": rng.normal(size=(4, 6)), "b1": rng.normal(size=4), "W2": rng.normal(size=(2, 4)),
              "b2": rng.normal(size=2)}
    nodes = [helper.make_node("Flatten", ["input"], ["flat"]), helper.make_node("Gemm", ["flat", "W1", "b1"], ["h"],
             transB=1), helper.make_node("Relu", ["h"], ["a"]), helper.make_node("Gemm", ["a", "W2", "b2"], ["y"],
             transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.DOUBLE, ["n", 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["n", 2])],
                              [numpy_helper.from_array(v, k) for k, v in arrays.items()])
    path = str(tmp_path / "y.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    net = sl.Network.from_onnx(path)
    assert net.graph.output_node == "y_"
    assert sl.verify(net, rng.normal(size=(3, 2, 3))).status == "PASSED"


def test_heat_history_columns_are_unique_with_a_node_named_pin():
    net = sl.Network.from_torch(_Named("pin"), input_shape=(1, 6))
    X, _ = _data(3)
    soft = sl.SoftPins({"conv[0]": np.zeros((3, 1))}, gamma=1.0)
    h = sl.heat(net, X, max_steps=20, init="forward", soft_pins=soft, record_every=5, progress=False)
    labels = h.history.labels
    assert len(set(labels)) == len(labels)
    assert labels.count("e_pin") == 1 and "e_pin_" in labels


# ----------------------------------------------------------------- a chain of the user's nodes keeps its names
NAMES = ("fc1", "act1", "fc2", "act2", "head")


def _named_chain(output="identity", seed=0, names=NAMES):
    """``(named, paper)``: the same chain built from nodes named ``names`` and by ``Network(weights, biases)``."""
    paper = sl.Network.random([3, 5, 4, 2], seed=seed, output=output)
    nodes = [Node(names[0], "linear", ["x"], params={"weight": paper.weights[0], "bias": paper.biases[0]}),
             Node(names[1], "relu", [names[0]]),
             Node(names[2], "linear", [names[1]], params={"weight": paper.weights[1], "bias": paper.biases[1]}),
             Node(names[3], "relu", [names[2]]),
             Node(names[4], "linear", [names[3]], params={"weight": paper.weights[2], "bias": paper.biases[2]})]
    return sl.Network.from_nodes(3, nodes, output), paper


def _inputs(n=6, seed=2):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, size=(n, 3)), rng.normal(size=(n, 2))


def test_a_chain_of_named_nodes_is_a_chain_labelled_by_its_nodes_as_a_graph_layout_is():
    net, paper = _named_chain()
    assert net.chain is not None and not net.is_graph and net.chain.names == NAMES
    assert paper.chain.names == ("z1", "a1", "z2", "a2", "z3")
    assert [node.name for node in net.graph.nodes] == list(NAMES)
    for reduced in (False, True):
        lay, graph_lay = sl.Layout.for_network(net, reduced), sl.Layout.from_graph(net.graph, reduced)
        for part in ("full_blocks", "free_blocks", "boundary_blocks", "edge_blocks"):
            assert [(b.name, b.offset, b.size) for b in getattr(lay, part)] == \
                   [(b.name, b.offset, b.size) for b in getattr(graph_lay, part)], part
        assert lay.full_labels == graph_lay.full_labels and lay.edge_labels == graph_lay.edge_labels
    assert [b.name for b in sl.Layout.for_network(paper).full_blocks] == \
           ["x", "1@x", "z1", "a1", "1@a1", "z2", "a2", "1@a2", "z3", "yhat"]


def test_heat_and_discord_label_a_named_chain_by_its_nodes_with_the_paper_chains_numbers():
    net, paper = _named_chain()
    X, Y = _inputs()
    runs = [sl.heat(n, X, max_steps=300, seed=1, record_every=50, pins={"yhat": Y}, progress=False)
            for n in (net, paper)]
    assert runs[0].history.labels == ["e_" + name for name in NAMES] + ["e_y"]
    assert runs[1].history.labels == ["e_z1", "e_a1", "e_z2", "e_a2", "e_z3", "e_y"]
    np.testing.assert_array_equal(runs[0].history.discord, runs[1].history.discord)
    np.testing.assert_array_equal(runs[0].state, runs[1].state)
    groups = [sl.discord.group_history(run.history) for run in runs]
    assert list(groups[0]) == list(groups[1]) == ["weight", "activation", "output"]
    for key in groups[1]:
        np.testing.assert_array_equal(groups[0][key], groups[1][key])
    pinned = [sl.discord.pinned(n, X, Y) for n in (net, paper)]
    assert pinned[0].edge_names == list(NAMES) and pinned[1].edge_names == ["W1", "R1", "W2", "R2", "W3"]
    np.testing.assert_array_equal(pinned[0].by_edge, pinned[1].by_edge)
    net, paper = _named_chain("sigmoid")
    res = [sl.discord.residuals(n, X, sl.harmonic_extension(n, X).free) for n in (net, paper)]
    assert res[0].edge_names == list(NAMES) + ["yhat"] and res[1].edge_names[-1] == "out"


def test_a_chain_whose_nodes_take_the_paper_names_in_other_places_computes_by_position():
    swapped = ("a1", "z1", "a2", "z2", "a3")          # the linear nodes are called a1, a2, a3
    net, paper = _named_chain("sigmoid", names=swapped)
    X, Y = _inputs()
    Y = 1.0 / (1.0 + np.exp(-Y))
    lay = sl.Layout.for_network(net)
    assert not lay.paper and lay.z(1) == "a1" and lay.a(1) == "z1" and lay.ones(1) == "1>a2"
    h, hp = sl.harmonic_extension(net, X), sl.harmonic_extension(paper, X)
    np.testing.assert_array_equal(h.node("a1"), hp.node("z1"))
    np.testing.assert_array_equal(h.free, hp.free)
    pinned = [sl.discord.pinned(n, X, Y) for n in (net, paper)]
    assert pinned[0].edge_names == list(swapped) + ["yhat"]
    np.testing.assert_array_equal(pinned[0].by_edge, pinned[1].by_edge)
    np.testing.assert_array_equal(sl.assemble(net, X[:2]).laplacian_free.toarray(),
                                  sl.assemble(paper, X[:2]).laplacian_free.toarray())


def test_exact_heat_spectrum_and_training_run_the_chain_paths_on_a_named_chain():
    net, paper = _named_chain()
    X, Y = _inputs()
    exact = [sl.heat(n, X[:2], method="exact", seed=1, progress=False) for n in (net, paper)]
    np.testing.assert_array_equal(exact[0].state, exact[1].state)
    spectra = [sl.spectrum(n, X, k=1, system="free", progress=False) for n in (net, paper)]
    assert spectra[0].block_names == list(NAMES) + ["yhat"]
    np.testing.assert_array_equal(spectra[0].lambda_min, spectra[1].lambda_min)
    np.testing.assert_array_equal(spectra[0].block_energy(), spectra[1].block_energy())
    fits = [sl.train(n, X, Y, steps=40, epoch_steps=20, seed=0, progress=False) for n in (net, paper)]
    assert fits[0].history.edge_names == ["e_" + name for name in NAMES] + ["e_y"]
    assert fits[0].network.chain.names == NAMES
    np.testing.assert_array_equal(fits[0].network.parameters(), fits[1].network.parameters())
    np.testing.assert_array_equal(fits[0].history.train_loss, fits[1].history.train_loss)


def test_a_named_chain_keeps_its_names_through_replace_copy_pickle_and_files(tmp_path):
    import pickle
    net, _ = _named_chain()
    path = str(tmp_path / "named")
    net.save(path)
    for other in (net.replace(output="tanh"), net.replace(W2=2 * net.weights[1]), net.copy(),
                  pickle.loads(pickle.dumps(net)), sl.Network.load(path),
                  net.with_parameters(net.parameters()), net.replace(params={"fc2": {"bias": np.ones(4)}})):
        assert other.chain is not None and other.chain.names == NAMES
    assert net.replace(output="tanh").output == "tanh"
    assert net.to_dict()["names"] == list(NAMES) and "names" not in _named_chain()[1].to_dict()
    np.testing.assert_array_equal(net.replace(params={"fc2": {"bias": np.ones(4)}}).biases[1], np.ones(4))
    with pytest.raises(ValueError, match="params names no node 'z2'; the nodes are fc1, act1"):
        net.replace(params={"z2": {"bias": np.ones(4)}})


def test_replace_output_and_parameters_work_on_a_graph_network():
    net = sl.Network.from_torch(_Named("out"), input_shape=(1, 6))
    assert net.is_graph and net.chain is None
    soft = net.replace(output="softmax")
    assert soft.is_graph and soft.output == "softmax" and soft.graph.nodes == net.graph.nodes
    X = _data()[0]
    logits = net.forward(X)
    np.testing.assert_allclose(soft.forward(X), np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True),
                               rtol=1e-12)
    theta = net.parameters()
    doubled = net.with_parameters(2 * theta)
    np.testing.assert_array_equal(doubled.parameters(), 2 * theta)
    assert [n.name for n in doubled.graph.nodes] == [n.name for n in net.graph.nodes]
    bias = net.replace(params={"out": {"bias": np.array([1.0, -1.0])}})
    np.testing.assert_allclose(bias.forward(X), logits - net.graph.node("out").params["bias"] + [1.0, -1.0],
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(sl.GraphNetworkError, match=r"graph network \(4 nodes.*params="):
        net.replace(W1=np.ones(1))
    with pytest.raises(ValueError, match="expected 26 parameters"):
        net.with_parameters(np.ones(3))


def test_a_torch_sequential_mlp_is_a_chain_named_after_its_modules():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    net = sl.Network.from_torch(model)
    assert net.chain is not None and net.chain.names == ("0", "1", "2")
    assert [b.name for b in sl.Layout.for_network(net).edge_blocks] == ["e_0", "e_1", "e_2", "e_y"]
