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
    with pytest.raises(ValueError, match=rf"node name '{name}' is not allowed.*'y', 'pin', 'rel'.*reserved"):
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
