"""The clamp (issue "every network people train"): ReLU6, Hardtanh, clamp and Hardsigmoid as one piecewise-linear
op, ``clamp(slope * z + offset, min, max)``, imported from PyTorch (modules, functions, tensor methods) and ONNX
(Clip, HardSigmoid); a tie at a bound takes the middle piece (``torch.clamp``'s gradient); a MobileNet-V2
inverted residual block against torch's float64 forward pass and its ONNX export, verified, its pinned discord
at rest and its heat flow settling on the forward pass with the pieces' crossings logged."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.naive_graph import coboundary, read_pattern  # noqa: E402
from helpers.torch_models import (AfterConv, assert_round_trip, export_onnx, randomize_batch_norms,  # noqa: E402
                                  reference)
import sheaflinalg as sl  # noqa: E402
from sheaflinalg.network.ops import rule_of  # noqa: E402

RELU6 = {"min": 0.0, "max": 6.0, "slope": 1.0, "offset": 0.0}
HARDSIGMOID = {"min": 0.0, "max": 1.0, "slope": 1 / 6, "offset": 0.5}


def test_a_tie_takes_the_middle_piece_as_torch_clamp_differentiates():
    node = sl.Node("c", "clamp", ["x"], {"min": -1.0, "max": 2.0, "slope": 1.0, "offset": 0.0})
    z = np.array([[-3.0, -1.0, 0.5, 2.0, 4.0]])
    pieces = rule_of("clamp").read_pattern(node, None, z)
    np.testing.assert_array_equal(pieces, [[-1, 0, 0, 0, 1]])
    t = torch.tensor(z, requires_grad=True)
    torch.clamp(t, -1.0, 2.0).sum().backward()
    np.testing.assert_array_equal(rule_of("clamp").blocks(node, None, pieces[0])[0], t.grad.numpy()[0])
    relu6 = sl.Node("r", "clamp", ["x"], RELU6)     # at z = 0 a ReLU6 is active, as the package's ReLU is
    assert rule_of("clamp").read_pattern(relu6, None, np.zeros((1, 1)))[0, 0] == 0
    assert rule_of("relu").read_pattern(None, None, np.zeros((1, 1)))[0, 0]


class Clamped(nn.Module):
    """``step(x)`` for a clamp written as a tensor method or a function with keywords."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def forward(self, x):
        return self.step(x)


#: ``(step, attrs)``: every torch form of a clamp and the attributes it becomes.
FORMS = [(nn.ReLU6(), RELU6), (nn.ReLU6(inplace=True), RELU6), (F.relu6, RELU6),
         (nn.Hardtanh(-2.0, 3.0), {"min": -2.0, "max": 3.0, "slope": 1.0, "offset": 0.0}),
         (lambda x: F.hardtanh(x, max_val=0.5), {"min": -1.0, "max": 0.5, "slope": 1.0, "offset": 0.0}),
         (lambda x: torch.clamp(x, -0.5, 2.0), {"min": -0.5, "max": 2.0, "slope": 1.0, "offset": 0.0}),
         (lambda x: x.clamp(min=-1, max=1), {"min": -1.0, "max": 1.0, "slope": 1.0, "offset": 0.0}),
         (lambda x: x.clip(0.0, 1.5), {"min": 0.0, "max": 1.5, "slope": 1.0, "offset": 0.0}),
         (lambda x: torch.clip(x, max=1.5, min=0.0), {"min": 0.0, "max": 1.5, "slope": 1.0, "offset": 0.0}),
         (nn.Hardsigmoid(), HARDSIGMOID), (F.hardsigmoid, HARDSIGMOID)]


@pytest.mark.parametrize("step, attrs", FORMS)
def test_every_torch_form_is_one_clamp_matching_torch(step, attrs):
    torch.manual_seed(0)
    model = AfterConv(step, 2).double().eval()
    net = sl.Network.from_torch(model, input_shape=(2, 5))
    assert [(node.op, node.attrs) for node in net.graph.nodes] == [("conv", net.graph.nodes[0].attrs),
                                                                    ("clamp", attrs)]
    X = np.random.default_rng(1).normal(size=(6, 2, 5)) * 6
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-15)
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("step, match", [
    (lambda x: x.clamp(min=0.0), "only numeric bounds on both sides"),
    (lambda x: torch.clamp(x, max=None, min=-1.0), "only numeric bounds on both sides"),
    (lambda x: F.hardtanh(x, 1.0, -1.0), "not increasing")])
def test_torch_refuses_clamps_without_two_numeric_bounds(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(Clamped(step), input_shape=(3,))


class InvertedResidual(nn.Module):
    """MobileNet-V2's block (expand 1x1, BN, ReLU6, depthwise 3x3, BN, ReLU6, project 1x1, BN, add) and a head."""

    def __init__(self, channels=3, expand=4):
        super().__init__()
        torch.manual_seed(0)
        hidden = channels * expand
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True), nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))
        self.head = nn.Linear(channels * 16, 3)
        randomize_batch_norms(self, 0)
        with torch.no_grad():            # wide enough pre-activations that both bounds of the ReLU6s are reached
            for conv in (self.block[0], self.block[3]):
                conv.weight.mul_(4.0)

    def forward(self, x):
        return self.head(torch.flatten(x + self.block(x), 1))


SHAPE = (3, 4, 4)


def _inputs():
    return np.random.default_rng(2).normal(size=(5,) + SHAPE)


#: The block's nodes from torch; its ONNX export folds every BatchNorm into the convolution before it.
BLOCK = ["conv", "batchnorm", "clamp", "conv", "batchnorm", "clamp", "conv", "batchnorm", "add", "reshape", "linear"]


def _check_block(net, model, ops=tuple(BLOCK)):
    assert [node.op for node in net.graph.nodes] == list(ops)
    X = _inputs()
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


def test_an_inverted_residual_block_matches_torch_and_round_trips(tmp_path):
    model = InvertedResidual().double().eval()
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    X = _check_block(net, model)
    pattern = sl.harmonic_extension(net, X).pattern      # the middle and both saturated pieces are reached
    assert set(np.unique(np.concatenate([rows.ravel() for rows in pattern.values()]))) == {-1, 0, 1}
    assert_round_trip(net, X, tmp_path / "net.npz")


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_the_onnx_export_of_the_block_matches_torch(tmp_path, opset):
    pytest.importorskip("onnx")
    model, path = InvertedResidual().double().eval(), str(tmp_path / "m.onnx")
    export_onnx(model, SHAPE, path, opset)
    net = sl.Network.from_onnx(path)
    _check_block(net, model, [op for op in BLOCK if op != "batchnorm"])
    assert all(node.attrs == RELU6 for node in net.graph.nodes if node.op == "clamp")


def _gradient(net, lay, x, w):
    """The dense gradient of the discord on the free coordinates, the pattern read off the state ``w``."""
    graph = net.graph
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    delta, c, _ = coboundary(graph, lay, x, read_pattern(graph, values), reduced=True)
    for node in graph.nodes:
        c[lay.full(node.name)] = values[node.name]
    return delta[:, lay.free_index].T @ (delta @ c), 1.0 + np.abs(delta).max() * np.abs(c).max()


def test_the_pinned_discord_of_the_block_is_an_equilibrium():
    """Pinned to outputs near its own, the settled samples zero the discord's gradient; clamp pieces that cycle
    (an equilibrium on a clamp's switching surface) leave a sample unsettled, as max-pool selections do."""
    net = sl.Network.from_torch(InvertedResidual().double().eval(), input_shape=SHAPE)
    X = _inputs().reshape(5, -1)
    Y = net.forward(X) + np.random.default_rng(3).normal(0, 0.05, size=(5, 3))
    pd = sl.discord.pinned(net, X, Y)
    assert pd.settled.sum() >= 3 and not any(pd.sliding)         # no ReLU: no surface is searched
    lay = pd.layout
    free = np.ones(lay.n_free, dtype=bool)
    free[lay.free(net.graph.output_node)] = False
    for s in np.flatnonzero(pd.settled):
        gradient, scale = _gradient(net, lay, X[s], pd.state[s])
        assert np.abs(gradient[free]).max() < 1e-9 * scale
    middle, saturated = pd.residuals.split_discord(net.graph.nodes[2].name).T
    np.testing.assert_allclose(middle + saturated, pd.residuals.by_edge()[:, 2], rtol=1e-12)
    at_rest = sl.discord.pinned(net, X, net.forward(X))
    assert at_rest.settled.all() and np.abs(at_rest.by_edge).max() < 1e-20


def test_the_heat_flow_of_the_block_lowers_the_discord_and_logs_piece_crossings():
    net = sl.Network.from_torch(InvertedResidual().double().eval(), input_shape=SHAPE)
    X = _inputs()[:2].reshape(2, -1)
    options = {"dt": 1.9 / sl.lambda_max_bound(net), "tol": 0.0, "seed": 0, "progress": False}
    start, res = sl.heat(net, X, max_steps=0, **options), sl.heat(net, X, max_steps=400, **options)
    assert np.all(res.discord < start.discord)
    log = res.crossings
    clamps = {k + 1 for k, node in enumerate(net.graph.nodes) if node.op == "clamp"}
    assert res.crossings_total > 0 and set(log[:, 2]) <= clamps and set(log[:, 4]) <= {-1, 0, 1}
    step, s, layer, entry, new = log[-1]      # replayed: the clamp's piece before and after that step
    node = net.graph.nodes[layer - 1]
    pieces = [rule_of("clamp").read_pattern(node, None, sl.heat(net, X, max_steps=n, **options).block(
        node.inputs[0])[s:s + 1])[0, entry] for n in (step - 1, step)]
    assert pieces[0] != pieces[1] == new


def _onnx(node, constants, opset):
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", 4])],
                              [numpy_helper.from_array(np.array(v, dtype=np.float64), k) for k, v in constants])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op_type, inputs, attrs, constants, opset, expected", [
    ("Clip", ["x"], {"min": -0.5, "max": 1.5}, [], 10, lambda z: np.clip(z, -0.5, 1.5)),
    ("Clip", ["x", "lo", "hi"], {}, [("lo", -0.5), ("hi", 1.5)], 13, lambda z: np.clip(z, -0.5, 1.5)),
    ("HardSigmoid", ["x"], {}, [], 13, lambda z: np.clip(0.2 * z + 0.5, 0, 1)),
    ("HardSigmoid", ["x"], {"alpha": 0.5, "beta": 0.25}, [], 13, lambda z: np.clip(0.5 * z + 0.25, 0, 1))])
def test_onnx_clip_and_hard_sigmoid_match_their_definitions(tmp_path, op_type, inputs, attrs, constants, opset,
                                                            expected):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx(onnx.helper.make_node(op_type, inputs, ["y"], **attrs), constants, opset), path)
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes] == ["clamp"]
    X = np.random.default_rng(4).normal(size=(5, 4)) * 3
    np.testing.assert_allclose(net.forward(X), expected(X), rtol=1e-7, atol=1e-8)
    assert sl.verify(net, X).passed
