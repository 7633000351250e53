"""Normalisations (layernorm, groupnorm, rmsnorm) imported from PyTorch and ONNX: a ConvNeXt-like block (GroupNorm(1, C)
or a LayerNorm on channels-last through permutes), a transformer MLP block on flattened tokens, an RMSNorm model and
the functional forms, against torch's float64 forward pass; the smooth sheaf at the forward state: harmonic extension
equal to the forward pass, verify, the spectrum equal to the dense Laplacian's, the response of delta_Omega to an
input perturbation equal to torch's JVP; heat from a random start; ONNX exports and helper-built files; refusals."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

IMAGE, TOKENS = (4, 5, 5), (6,)


def _randomise(*norms):
    """Weights and biases away from torch's identity initialisation (the affine part is a node then)."""
    with torch.no_grad():
        for norm in norms:
            for value in (norm.weight, getattr(norm, "bias", None)):
                if value is not None:
                    value.normal_()


class ConvNeXt(nn.Module):
    """Depthwise conv, a normalisation (GroupNorm(1, C), or LayerNorm(C) on channels-last), 1x1 conv, GELU, 1x1
    conv, the residual, a linear head."""

    def __init__(self, norm, affine=True, eps=1e-5):
        super().__init__()
        torch.manual_seed(0)
        C = IMAGE[0]
        self.channels_last = norm == "layer"
        self.dw, self.pw1, self.pw2 = nn.Conv2d(C, C, 3, padding=1, groups=C), nn.Conv2d(C, 8, 1), nn.Conv2d(8, C, 1)
        self.norm = nn.LayerNorm(C, eps=eps, elementwise_affine=affine) if self.channels_last else \
            nn.GroupNorm(1, C, eps=eps, affine=affine)
        self.head = nn.Linear(C * IMAGE[1] * IMAGE[2], 3)
        if affine:
            _randomise(self.norm)

    def forward(self, x):
        y = self.dw(x)
        y = self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2) if self.channels_last else self.norm(y)
        return self.head((x + self.pw2(F.gelu(self.pw1(y)))).flatten(1))


class TokenMLP(nn.Module):
    """A transformer MLP block on flattened tokens: ``x + fc2(gelu(fc1(ln1(x))))``, ``ln2``, a head."""

    def __init__(self, eps=1e-5, rms=False, activation=F.gelu):
        super().__init__()
        torch.manual_seed(1)
        D, self.activation = TOKENS[0], activation
        norm = nn.RMSNorm if rms else nn.LayerNorm
        self.ln1, self.ln2 = norm(D, eps=eps), norm(D, eps=eps)
        self.fc1, self.fc2, self.head = nn.Linear(D, 12), nn.Linear(12, D), nn.Linear(D, 3)
        _randomise(self.ln1, self.ln2)

    def forward(self, x):
        x = x + self.fc2(self.activation(self.fc1(self.ln1(x))))
        return self.head(self.ln2(x))


class Functional(nn.Module):
    """The functional forms without weights: F.layer_norm over two axes, F.group_norm, F.rms_norm."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.conv, self.head = nn.Conv1d(2, 4, 3), nn.Linear(4 * 4, 2)

    def forward(self, x):
        y = F.layer_norm(self.conv(x), (4, 4), eps=1e-4)
        y = F.group_norm(torch.tanh(y), 2)
        return self.head(F.rms_norm(y, (4,), eps=1e-6).flatten(1))


def _inputs(shape, n=4, seed=3):
    return np.random.default_rng(seed).normal(size=(n,) + shape)


def _dense_spectrum_matches(net, x):
    """``sl.spectrum`` of one sample (reduced system) equals ``eigh`` of the assembled dense Laplacian."""
    L = sl.assemble(net, x, reduced=True).laplacian_reduced.toarray()
    eig = np.linalg.eigvalsh(L)
    result = sl.spectrum(net, x, k=2, method="arpack", vectors=False, tol=1e-12, progress=False)
    np.testing.assert_allclose(result.smallest[0], eig[:2], rtol=1e-7)
    np.testing.assert_allclose(result.largest[0], eig[-2:][::-1] if result.largest[0, 0] > result.largest[0, 1]
                               else eig[-2:], rtol=1e-9)


def _jvp_matches(net, model, x, v):
    """The response of the reduced system's ``delta_Omega`` to an input perturbation ``v`` (solve
    ``delta_free dS = -delta_boundary du``) equals torch's JVP of the model at ``x``."""
    s = sl.assemble(net, x, reduced=True)
    lay = s.layout
    du = np.zeros(lay.n_full)
    du[lay.full("x")] = v.ravel()
    dS = np.linalg.solve(s.delta_free.toarray(), -(s.delta_boundary @ du[lay.boundary_index]))
    _, torch_jvp = torch.func.jvp(model, (torch.from_numpy(x),), (torch.from_numpy(v[None]),))
    np.testing.assert_allclose(dS[lay.free(net.graph.output_node)], torch_jvp.detach().numpy().ravel(), rtol=1e-9, atol=1e-11)


def _check(net, model, X):
    """Forward pass, harmonic extension, verify, spectrum and JVP against torch and the dense Laplacian."""
    model = model.double().eval()
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)
    h = sl.harmonic_extension(net, X)
    np.testing.assert_allclose(h.output, net.forward(X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    _dense_spectrum_matches(net, X[:1])
    _jvp_matches(net, model, X[:1], np.random.default_rng(4).normal(size=X.shape[1:]))


@pytest.mark.parametrize("norm, affine", [("group", True), ("group", False), ("layer", False), ("layer", True)])
def test_a_convnext_block_matches_torch(tmp_path, norm, affine):
    model = ConvNeXt(norm, affine)
    net = sl.Network.from_torch(model, input_shape=IMAGE)
    ops = [node.op for node in net.graph.nodes]
    assert ops.count("layernorm" if norm == "layer" else "groupnorm") == 1
    assert ("norm.affine" in [node.name for node in net.graph.nodes]) == affine
    X = _inputs(IMAGE)
    _check(net, model, X)
    assert_round_trip(net, X, tmp_path / "net.npz")


@pytest.mark.parametrize("rms", [False, True])
def test_a_token_mlp_block_matches_torch(tmp_path, rms):
    model = TokenMLP(rms=rms)
    net = sl.Network.from_torch(model, input_shape=TOKENS)
    norm = "rmsnorm" if rms else "layernorm"
    assert [(n.name, n.op) for n in net.graph.nodes if n.name.startswith("ln")] == [
        ("ln1", norm), ("ln1.affine", "batchnorm"), ("ln2", norm), ("ln2.affine", "batchnorm")]
    X = _inputs(TOKENS)
    _check(net, model, X)
    assert_round_trip(net, X, tmp_path / "net.npz")


def test_the_functional_forms_match_torch():
    model = Functional()
    net = sl.Network.from_torch(model, input_shape=(2, 6))
    assert [(n.op, dict(n.attrs)) for n in net.graph.nodes if n.rule.smooth and n.op != "tanh"] == [
        ("layernorm", {"n_axes": 2, "eps": 1e-4}), ("groupnorm", {"groups": 2, "eps": 1e-5}),
        ("rmsnorm", {"n_axes": 1, "eps": 1e-6})]
    _check(net, model, _inputs((2, 6)))


class FunctionalAffine(nn.Module):
    """The functional forms with weights and biases that are the model's parameters and buffers."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.fc, self.w, self.b = nn.Linear(6, 8), nn.Parameter(torch.randn(8)), nn.Parameter(torch.randn(8))
        self.gw = nn.Parameter(torch.randn(4))
        self.register_buffer("gb", torch.randn(4))

    def forward(self, x):
        h = F.rms_norm(F.layer_norm(self.fc(x), (8,), self.w, self.b), (8,), self.w)
        return F.group_norm(h.view(-1, 4, 2), 2, self.gw, self.gb).flatten(1)


def test_the_functional_forms_read_their_weights():
    model = FunctionalAffine()
    net = sl.Network.from_torch(model, input_shape=(6,))
    assert [n.op for n in net.graph.nodes if n.name.endswith(".affine")] == ["batchnorm"] * 3
    model = model.double()
    np.testing.assert_array_equal(net.graph.node("group_norm.affine").params["shift"], model.gb.numpy())
    _check(net, model, _inputs((6,)))


def test_heat_from_a_random_start_converges_to_the_forward_pass():
    """With eps = 0.5 the normalisations' norm bound is sqrt(2): the default bound gives a stable step."""
    model = TokenMLP(eps=0.5)
    net = sl.Network.from_torch(model, input_shape=TOKENS)
    X = _inputs(TOKENS, n=2)
    dt = 1.0 / sl.lambda_max_bound(net)
    result = sl.heat(net, X, dt=dt, max_steps=200000, tol=1e-13, init="random", seed=0, reduced=True,
                     progress=False)
    assert result.converged
    np.testing.assert_allclose(result.output, net.forward(X), rtol=1e-8, atol=1e-8)


def test_the_norm_at_the_forward_state_is_far_below_the_bound_of_every_state():
    net = sl.Network.from_torch(TokenMLP(), input_shape=TOKENS)
    node = net.graph.node("ln1")
    rows = sl.assemble(net, _inputs(TOKENS), reduced=True).pattern["ln1"]
    at = node.rule.norm_at(node, net.graph, rows)
    assert at.shape == (4,) and np.all(at < 10.0) and node.rule.norm_bound(node, net.graph) > 300


def _export(model, shape, opset, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.double().eval(), (torch.zeros((2,) + shape, dtype=torch.float64),), path,
                          dynamo=False, input_names=["input"], output_names=["output"], opset_version=opset,
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


@pytest.mark.parametrize("opset", [17, 18])
def test_onnx_export_of_the_token_block_matches_torch(tmp_path, opset):
    model = TokenMLP(activation=F.relu)       # (GELU's ONNX form, an Erf of a product, is not read yet)
    _export(model, TOKENS, opset, tmp_path / "m.onnx")
    net = sl.Network.from_onnx(str(tmp_path / "m.onnx"))
    assert [n.op for n in net.graph.nodes].count("layernorm") == 2
    X = _inputs(TOKENS)
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed


def test_a_layer_norm_written_out_below_opset_17_is_refused_with_advice(tmp_path):
    _export(TokenMLP(), TOKENS, 14, tmp_path / "m.onnx")
    with pytest.raises(sl.UnsupportedModelError, match=r"\(Sub\).*LayerNorm written out.*opset_version >= 17"):
        sl.Network.from_onnx(str(tmp_path / "m.onnx"))


#: ONNX's epsilon attributes are float32: 1e-3, 1e-4 and the default 1e-5 as the file holds them.
EPS3, EPS4, EPS5 = (float(np.float32(e)) for e in (1e-3, 1e-4, 1e-5))


def _normalised(x, axes, eps, centred=True):
    """The definition: ``(x - mean) / sqrt(mean((x - mean)^2) + eps)`` over ``axes`` (mean 0 uncentred)."""
    m = x.mean(axis=axes, keepdims=True) if centred else 0.0
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)


def _onnx_file(tmp_path, op, inputs, shape, opset, **attrs):
    """A file of one ONNX normalisation of ``x`` (batch, *shape) with constant ``inputs`` (name: array)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node(op, ["x", *inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", *shape])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", *shape])],
                              [numpy_helper.from_array(np.asarray(v, dtype=np.float64), k) for k, v in inputs.items()])
    path = str(tmp_path / f"{op}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _onnx_matches(path, X, expected, ops):
    net = sl.Network.from_onnx(path)
    assert [n.op for n in net.graph.nodes] == ops
    np.testing.assert_allclose(net.forward(X), expected.reshape(X.shape[0], -1), rtol=1e-12, atol=1e-12)


def test_onnx_layer_and_rms_normalizations_match_their_definitions(tmp_path):
    rng = np.random.default_rng(5)
    X, flat = rng.normal(size=(3, 4, 3)), rng.normal(size=(3, 6))
    scale, shift = rng.normal(size=6), rng.normal(size=6)
    for axis, axes in ((-1, 2), (1, (1, 2))):          # Scale 1 and no B: no affine node
        path = _onnx_file(tmp_path, "LayerNormalization", {"s": np.ones((4, 3)[axis:])}, (4, 3), 17, axis=axis,
                          epsilon=1e-3)
        _onnx_matches(path, X, _normalised(X, axes, EPS3), ["layernorm"])
    path = _onnx_file(tmp_path, "LayerNormalization", {"s": scale, "b": shift}, (6,), 17)
    _onnx_matches(path, flat, _normalised(flat, 1, EPS5) * scale + shift, ["layernorm", "batchnorm"])
    path = _onnx_file(tmp_path, "RMSNormalization", {"s": scale}, (6,), 23, epsilon=1e-4)
    _onnx_matches(path, flat, _normalised(flat, 1, EPS4, centred=False) * scale, ["rmsnorm", "batchnorm"])


def test_onnx_group_normalization_matches_its_definition(tmp_path):
    rng = np.random.default_rng(6)
    X, scale, shift = rng.normal(size=(3, 4, 3)), rng.normal(size=4), rng.normal(size=4)
    path = _onnx_file(tmp_path, "GroupNormalization", {"s": scale, "b": shift}, (4, 3), 21, num_groups=2,
                      epsilon=1e-3)
    expected = _normalised(X.reshape(3, 2, 6), 2, EPS3).reshape(X.shape) * scale[:, None] + shift[:, None]
    _onnx_matches(path, X, expected, ["groupnorm", "batchnorm"])


def test_onnx_instance_normalization_is_a_group_norm_of_one_channel_per_group(tmp_path):
    rng = np.random.default_rng(7)
    X, scale, shift = rng.normal(size=(3, 4, 3)), rng.normal(size=4), rng.normal(size=4)
    path = _onnx_file(tmp_path, "InstanceNormalization", {"s": scale, "b": shift}, (4, 3), 17)
    expected = _normalised(X, 2, EPS5) * scale[:, None] + shift[:, None]
    net = sl.Network.from_onnx(path)
    assert dict(net.graph.nodes[0].attrs) == {"groups": 4, "eps": EPS5}
    np.testing.assert_allclose(net.forward(X), expected.reshape(3, -1), rtol=1e-12, atol=1e-12)


def test_onnx_refusals(tmp_path):
    path = _onnx_file(tmp_path, "LayerNormalization", {"s": np.ones((2, 4, 3))}, (4, 3), 17, axis=0)
    with pytest.raises(sl.UnsupportedModelError, match="axis=0 normalises across the batch"):
        sl.Network.from_onnx(path)


@pytest.mark.parametrize("layer, match", [
    (lambda: nn.LayerNorm(6, eps=0.0), "eps must be a positive number"),
    (lambda: nn.RMSNorm(4, eps=-1.0), "eps must be a positive number"),
    (lambda: nn.LayerNorm((2, 6), elementwise_affine=False), "normalized_shape|shape")])
def test_torch_refusals(layer, match):
    with pytest.raises((sl.UnsupportedModelError, ValueError), match=match):
        sl.Network.from_torch(nn.Sequential(nn.Conv1d(1, 6, 1), layer()), input_shape=(1, 4))
