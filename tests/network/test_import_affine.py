"""Transformer and ConvNeXt pieces (issue "every network people train") imported from PyTorch and ONNX: linear
layers on the last axis of token sequences and channels-last maps, elementwise affine maps with parameters and
numbers (positional embedding, layer scale, ``x / 8``), a class token expanded over the batch and concatenated,
``torch.roll`` and the identities of eval mode, against torch's float64 forward pass; their ONNX exports, graph
files, verification; refusals."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.stochastic_depth import DropPathBlock  # noqa: E402
from helpers.torch_models import assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

T, D = 4, 6


class TokenMLP(nn.Module):
    """A class token and a positional embedding, a 2-layer token MLP with a layer scale and a residual, a roll of
    the tokens, ``x / 8 - 1``, a head; its linear layers as modules, ``F.linear`` or ``x @ W + b``."""

    def __init__(self, form="module"):
        super().__init__()
        torch.manual_seed(0)
        self.form = form
        self.cls_token = nn.Parameter(torch.randn(1, 1, D))
        self.pos = nn.Parameter(torch.randn(1, T + 1, D))
        self.fc1, self.fc2 = nn.Linear(D, 8), nn.Linear(8, D)
        self.gamma = nn.Parameter(torch.randn(D))
        self.head = nn.Linear((T + 1) * D, 3)

    def mlp(self, x):
        if self.form == "module":
            return self.fc2(F.relu(self.fc1(x)))
        if self.form == "functional":
            return F.linear(F.relu(F.linear(x, self.fc1.weight, self.fc1.bias)), self.fc2.weight, self.fc2.bias)
        return torch.relu(x @ self.fc1.weight.T + self.fc1.bias) @ self.fc2.weight.T + self.fc2.bias

    def forward(self, x):
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = x + self.gamma * self.mlp(x)
        return self.head((torch.roll(x, 1, dims=1) / 8.0 - 1).flatten(1))


class ConvNeXtLike(nn.Module):
    """A ConvNeXt block with ReLU in place of GELU and LayerNorm: a depthwise convolution, the linear layers in
    channels-last order, a layer scale per channel (``(C,)`` channels-last, ``(C, 1, 1)`` channels-first), the
    residual, a head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.dw = nn.Conv2d(3, 3, 3, padding=1, groups=3)
        self.fc1, self.fc2 = nn.Linear(3, 8), nn.Linear(8, 3)
        self.gamma, self.scale = nn.Parameter(torch.randn(3)), nn.Parameter(torch.randn(3, 1, 1))
        self.head = nn.Linear(3 * 4 * 5, 2)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(F.relu(self.fc1(y)))
        return self.head((x + self.scale * y.permute(0, 3, 1, 2)).flatten(1))


MODELS = {"tokens": (TokenMLP, (T, D)), "convnext": (ConvNeXtLike, (3, 4, 5))}


def _check(net, model, shape):
    X = np.random.default_rng(1).normal(size=(5,) + shape)
    np.testing.assert_allclose(net.forward(X), reference(model.double().eval(), X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


@pytest.mark.parametrize("form", ["module", "functional", "matmul"])
def test_a_token_mlp_with_class_token_and_positions_matches_torch(tmp_path, form):
    model = TokenMLP(form)
    net = sl.Network.from_torch(model, input_shape=(T, D))
    ops = [node.op for node in net.graph.nodes]
    assert ops[:2] == ["constant", "concat"] and "roll" in ops and ops.count("affine") >= 3
    fc1 = next(node for node in net.graph.nodes if node.op == "linear")
    assert net.graph.shapes[fc1.inputs[0]] == (T + 1, D) and net.graph.shapes[fc1.name] == (T + 1, 8)
    np.testing.assert_array_equal(net.graph.nodes[0].params["value"], model.cls_token.detach().double()[0].numpy())
    assert_round_trip(net, _check(net, model, (T, D)), tmp_path / "net.npz")


def test_a_convnext_block_in_channels_last_matches_torch(tmp_path):
    model = ConvNeXtLike()
    net = sl.Network.from_torch(model, input_shape=(3, 4, 5))
    scales = [node.params["scale"].shape for node in net.graph.nodes if node.op == "affine"]
    assert sorted(scales) == [(3,), (3, 1, 1)]
    assert [net.graph.shapes[n.name] for n in net.graph.nodes if n.op == "linear"][:2] == [(4, 5, 8), (4, 5, 3)]
    assert_round_trip(net, _check(net, model, (3, 4, 5)), tmp_path / "net.npz")


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("which", list(MODELS))
def test_onnx_exports_match_torch(tmp_path, which, opset):
    pytest.importorskip("onnx")
    cls, shape = MODELS[which]
    model, path = cls().double().eval(), str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + shape, dtype=torch.float64),), path, dynamo=False,
                          opset_version=opset, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    net = sl.Network.from_onnx(path)
    assert {"linear", "affine"} <= {node.op for node in net.graph.nodes}
    assert (net.graph.nodes[0].op == "constant") == (which == "tokens")
    _check(net, model, shape)


class Identities(nn.Module):
    """Eval-mode identities around two linear layers: clone, contiguous, type_as, expand_as, Identity, dropout
    (module, F.dropout, F.dropout1d), a concatenation of one tensor, torchvision's stochastic depth."""

    def __init__(self):
        super().__init__()
        self.block, self.idle, self.drop = DropPathBlock(D), nn.Identity(), nn.Dropout(0.3)
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        y = self.drop(self.idle(self.block(x).clone().contiguous()))
        y = F.dropout1d(F.dropout(torch.cat([y], 1), 0.5, training=False), 0.5, training=False)
        return self.fc(y.type_as(x).expand_as(x))


def test_eval_mode_identities_are_elided(tmp_path):
    model = Identities().eval()
    net = sl.Network.from_torch(model, input_shape=(T, D))
    assert [node.op for node in net.graph.nodes] == ["linear", "relu", "add", "linear"]
    assert_round_trip(net, _check(net, model, (T, D)), tmp_path / "net.npz")


def test_a_constant_expanded_but_only_added_is_no_node():
    model = _Wrap(lambda s, x: s.fc(x + s.w[:T].expand(1, -1, -1)), fc=nn.Linear(D, 2))
    net = sl.Network.from_torch(model, input_shape=(T, D))
    assert [node.op for node in net.graph.nodes] == ["affine", "linear"]
    _check(net, model, (T, D))


class _Wrap(nn.Module):
    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for key, module in modules.items():
            setattr(self, key, module)
        self.w = nn.Parameter(torch.arange(D * D, dtype=torch.float32).reshape(D, D))

    def forward(self, x):
        return self.fn(self, x)


@pytest.mark.parametrize("model, match", [
    (DropPathBlock(D).train(), "stochastic depth in training mode"),
    (_Wrap(lambda s, x: torch.roll(x, 1)), "without dims"),
    (_Wrap(lambda s, x: torch.roll(x, 1, 0)), "batch axis 0"),
    (_Wrap(lambda s, x: x.expand(x.shape[0], 2, T, D).flatten(1)), r"changes the shape \(4, 6\) to \(2, 4, 6\)"),
    (_Wrap(lambda s, x: torch.div(x, 2.0, rounding_mode="floor")), "true division"),
    (_Wrap(lambda s, x: x / x), "combines two values"),
    (_Wrap(lambda s, x: x / s.w[0]), "constant without zeros"),
    (_Wrap(lambda s, x: x + s.w[:2, None, :]), "the same way for every sample")],
    ids=["drop-path", "roll-flat", "roll-batch", "expand", "floor", "quotient", "zeros", "per-batch"])
def test_what_is_not_affine_or_an_identity_is_refused(model, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(model, input_shape=(T, D))


def _onnx(tmp_path, nodes, constants, out_shape=("N", 3, 4)):
    """An ONNX file of ``nodes`` on an input ``x`` of shape (batch, 3, 4), the constants as initializers (float64,
    integers kept)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, list(out_shape))],
                              [numpy_helper.from_array(np.asarray(v, dtype=np.float64 if np.asarray(v).dtype.kind == "f"
                                                                  else np.int64), k) for k, v in constants.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _node(op_type, inputs, output, **attrs):
    from onnx import helper
    return helper.make_node(op_type, inputs, [output], name=output, **attrs)


def test_onnx_arithmetic_with_constants_is_affine(tmp_path):
    """``(c - x) * s / d + t`` (every constant first or second, broadcast per row, per entry, or one number), a
    MatMul on the last axis with its bias folded: the import check compares every node with onnx's reference."""
    rng = np.random.default_rng(0)
    constants = {"c": rng.normal(size=(1, 3, 4)), "s": rng.normal(size=(3, 1)), "d": np.array(2.0),
                 "t": rng.normal(size=4), "w": rng.normal(size=(4, 5)), "b": rng.normal(size=5)}
    nodes = [_node("Sub", ["c", "x"], "sub"), _node("Mul", ["sub", "s"], "mul"), _node("Div", ["mul", "d"], "div"),
             _node("Add", ["t", "div"], "add"), _node("MatMul", ["add", "w"], "mm"), _node("Add", ["mm", "b"], "y")]
    net = sl.Network.from_onnx(_onnx(tmp_path, nodes, constants, ("N", 3, 5)))
    assert [node.op for node in net.graph.nodes] == ["affine"] * 4 + ["linear"]
    np.testing.assert_array_equal(net.graph.nodes[-1].params["bias"], constants["b"])
    X = rng.normal(size=(3, 3, 4))
    np.testing.assert_allclose(net.forward(X).reshape(X.shape[0], 3, 5),
                               ((constants["c"] - X) * constants["s"] / 2.0 + constants["t"]) @ constants["w"]
                               + constants["b"], rtol=1e-12)


def test_onnx_class_token_tiled_over_the_batch_is_a_constant(tmp_path):
    """``Concat([Tile(token, [n, 1, 1]), x], 1)`` with ``n`` read off the input's shape, then a Gemm on the flat
    result: a constant node joined to the tokens."""
    from onnx import helper
    rng = np.random.default_rng(1)
    constants = {"token": rng.normal(size=(1, 1, 4)), "ones": np.array([1, 1], dtype=np.int64),
                 "zero": np.array([0], dtype=np.int64), "g": rng.normal(size=(2, 16)), "h": rng.normal(size=2)}
    nodes = [_node("Shape", ["x"], "shape"), _node("Gather", ["shape", "zero"], "n"),
             _node("Concat", ["n", "ones"], "reps", axis=0), _node("Tile", ["token", "reps"], "tokens"),
             _node("Concat", ["tokens", "x"], "cat", axis=1), _node("Flatten", ["cat"], "flat"),
             helper.make_node("Gemm", ["flat", "g", "h"], ["y"], name="gemm", transB=1)]
    net = sl.Network.from_onnx(_onnx(tmp_path, nodes, constants, ("N", 2)))
    assert [node.op for node in net.graph.nodes] == ["constant", "concat", "reshape", "linear"]
    np.testing.assert_array_equal(net.graph.nodes[0].params["value"], constants["token"][0])


@pytest.mark.parametrize("nodes, match", [
    ([_node("Div", ["c", "x"], "y")], "division of a value by a constant"),
    ([_node("Div", ["x", "x"], "y")], "two values computed from the input"),
    ([_node("Shape", ["x"], "s"), _node("Expand", ["x", "s"], "e"), _node("Concat", ["s", "s"], "ss", axis=0),
      _node("Expand", ["x", "ss"], "y")], "enlarges a value")], ids=["c/x", "x/x", "expand-value"])
def test_onnx_refuses_what_is_not_affine(tmp_path, nodes, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(_onnx(tmp_path, nodes, {"c": np.ones((3, 4))}))
