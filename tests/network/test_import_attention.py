"""Gating and attention (products of two values, softmax) imported from PyTorch and ONNX, against torch float64.

A squeeze-and-excitation block (conv, adaptive average pool, 1x1 convolutions, relu, sigmoid, a broadcast
product), a SiLU written as ``x * sigmoid(x)`` and a GLU-style gate, and one-head self-attention on ``(T, D)``
tokens (Q, K, V by 1x1 ``Conv1d``; ``F.scaled_dot_product_attention`` plain and causal, and the same written out
with ``matmul``, ``softmax`` and ``bmm``): the harmonic extension is torch's forward pass, ``sl.verify`` passes,
the spectrum is dense ``eigh`` of the assembled Laplacian, heat from a random start settles on the forward
pass, and the assembled ``delta_Omega``'s response to an input perturbation is torch's Jacobian-vector
product.
"""

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

TOKENS = (3, 5)          # (D, T): channels first, as Conv1d reads them
IMAGE = (2, 4, 4)


class Excite(nn.Module):
    """Squeeze and excitation: ``h * sigmoid(W2 relu(W1 mean(h)))`` with ``h = relu(conv(x))``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.pool = nn.Conv2d(2, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1)
        self.squeeze, self.excite = nn.Conv2d(4, 2, 1), nn.Conv2d(2, 4, 1)

    def forward(self, x):
        h = F.relu(self.conv(x))
        return (h * torch.sigmoid(self.excite(F.relu(self.squeeze(self.pool(h)))))).flatten(1)


class Gates(nn.Module):
    """A SiLU as ``x * sigmoid(x)`` (``Tensor.mul``) and a GLU-style gate ``a * tanh(b)`` (``torch.mul``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.a, self.b = nn.Conv1d(3, 4, 1), nn.Conv1d(3, 4, 1)

    def forward(self, x):
        a = self.a(x)
        return torch.mul(a.mul(torch.sigmoid(a)), torch.tanh(self.b(x))).flatten(1)


class Attention(nn.Module):
    """One head on ``T`` tokens of ``D`` features, ``softmax(Q K^T / sqrt(d)) V`` flattened, causal or not:
    ``F.scaled_dot_product_attention`` (``explicit=False``), or written out with ``torch.matmul``, ``nn.Softmax``
    and ``torch.bmm`` (the scale folded into Q's weights: a product with a number is another op)."""

    def __init__(self, explicit=False, causal=False):
        super().__init__()
        torch.manual_seed(2)
        self.explicit, self.causal = explicit, causal
        self.q, self.k, self.v = (nn.Conv1d(TOKENS[0], 4, 1) for _ in range(3))
        self.softmax = nn.Softmax(dim=-1)
        if explicit:
            with torch.no_grad():
                self.q.weight /= 2.0
                self.q.bias /= 2.0

    def forward(self, x):
        q, k, v = (layer(x).transpose(1, 2) for layer in (self.q, self.k, self.v))       # (N, T, 4)
        if not self.explicit:
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).flatten(1)
        return torch.bmm(self.softmax(torch.matmul(q, k.transpose(1, 2))), v).flatten(1)


MODELS = {"excite": (Excite, IMAGE), "gates": (Gates, TOKENS), "attention": (lambda: Attention(), TOKENS),
          "causal": (lambda: Attention(causal=True), TOKENS), "explicit": (lambda: Attention(explicit=True), TOKENS)}


def _import(which):
    make, shape = MODELS[which]
    model = make().double().eval()
    return model, sl.Network.from_torch(model, input_shape=shape), shape


def _inputs(shape, n=3, seed=1):
    return np.random.default_rng(seed).normal(size=(n,) + shape)


@pytest.mark.parametrize("which", sorted(MODELS))
def test_the_harmonic_extension_is_torchs_forward_pass_and_verify_passes(tmp_path, which):
    model, net, shape = _import(which)
    X = _inputs(shape)
    ref = reference(model, X)
    np.testing.assert_allclose(net.forward(X), ref, rtol=1e-12, atol=1e-12)
    h = sl.harmonic_extension(net, X.reshape(len(X), -1))
    np.testing.assert_allclose(h.node(net.graph.output_node), ref, rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    assert_round_trip(net, X, tmp_path / "net.npz")


def test_the_importer_makes_the_nodes_it_should():
    ops = {which: [(node.op, dict(node.attrs)) for node in _import(which)[1].graph.nodes
                   if node.op in ("mul", "matmul", "softmax")] for which in MODELS}
    assert ops["excite"] == [("mul", {})]
    assert ops["gates"] == [("mul", {}), ("mul", {})]
    scores = ("matmul", {"alpha": 1 / math.sqrt(4)})
    assert ops["attention"] == [scores, ("softmax", {"axis": 1, "causal": False}), ("matmul", {"alpha": 1.0})]
    assert ops["causal"][1] == ("softmax", {"axis": 1, "causal": True})
    assert ops["explicit"] == [("matmul", {"alpha": 1.0}), ("softmax", {"axis": 1, "causal": False}),
                               ("matmul", {"alpha": 1.0})]


@pytest.mark.parametrize("which", ["excite", "causal", "explicit"])
def test_the_spectrum_is_dense_eigh_of_the_assembled_laplacian(which):
    _, net, shape = _import(which)
    X = _inputs(shape, n=2)
    L = sl.assemble(net, X, reduced=True).laplacian_free.toarray()
    N = L.shape[0] // 2
    sp = sl.spectrum(net, X, k=2, method="dense", progress=False)
    for s in range(2):
        w = np.linalg.eigvalsh(L[s * N:(s + 1) * N, s * N:(s + 1) * N])
        np.testing.assert_allclose(sp.smallest[s], w[:2], rtol=1e-9)
        np.testing.assert_allclose(sp.largest[s], w[::-1][:2], rtol=1e-9)


@pytest.mark.parametrize("which, dt", [("gates", 0.13), ("causal", 0.063)])
def test_heat_from_a_random_start_settles_on_the_forward_pass(which, dt):
    """No step is stable for every state: the bound is read at every step's state (adaptive=False refuses an
    unstable step there, naming the products), and heat below it settles on the forward pass."""
    _, net, shape = _import(which)
    X = _inputs(shape, n=1).reshape(1, -1)
    with pytest.raises(ValueError, match=r"dt=1 is unstable for explicit Euler at the state of step 0: .*"
                                         r"node\(s\) '[^']*' \((mul|matmul), "):
        sl.heat(net, X, dt=1.0, max_steps=1, seed=0, adaptive=False, progress=False)
    res = sl.heat(net, X, dt=dt, max_steps=6000, tol=1e-10, seed=0, progress=False)
    assert res.converged
    np.testing.assert_allclose(res.output, net.forward(X), atol=1e-7)
    np.testing.assert_allclose(res.state, sl.harmonic_extension(net, X).free[:, :res.layout.n_free], atol=1e-7)


@pytest.mark.parametrize("which", sorted(MODELS))
def test_the_tangent_sheaf_responds_to_an_input_perturbation_as_torchs_jvp(which):
    """``delta_free w = -delta_boundary du`` (du on the input only): ``w`` at the output is ``J du``."""
    model, net, shape = _import(which)
    x, du = _inputs(shape, n=2, seed=3)
    s = sl.assemble(net, x[None], reduced=True)
    lay = s.layout
    full = np.zeros(lay.n_full)
    full[lay.full("x")] = du.ravel()
    delta = s.delta.toarray()
    w = np.linalg.solve(delta[:, lay.free_index], -delta[:, lay.boundary_index] @ full[lay.boundary_index])
    free = np.zeros(lay.n_full)
    free[lay.free_index] = w
    _, jvp = torch.func.jvp(model, (torch.from_numpy(x[None]),), (torch.from_numpy(du[None]),))
    np.testing.assert_allclose(free[lay.full(net.graph.output_node)], jvp.detach().numpy().ravel(), rtol=1e-10, atol=1e-12)


class _Wrap(nn.Module):
    """``step(self, conv(x))`` with a 1x1 ``Conv1d`` on ``TOKENS``, parameters ``p`` (a column) and ``w``."""

    def __init__(self, step):
        super().__init__()
        torch.manual_seed(4)
        self.step, self.conv = step, nn.Conv1d(3, 3, 1)
        self.p, self.w = nn.Parameter(torch.randn(3, 1)), nn.Parameter(torch.randn(5, 2))

    def forward(self, x):
        return self.step(self, self.conv(x))


@pytest.mark.parametrize("step, match", [
    (lambda s, y: y[:, :2] * y.sum(1), "must have the same rank"),     # torch aligns the batch with an axis
    (lambda s, y: F.softmax(y, 0) + y, "dim=0 is not a per-sample axis"),
    (lambda s, y: y.softmax(-1, dtype=torch.float64) + y, "dtype"),
    (lambda s, y: F.scaled_dot_product_attention(y, y, y, attn_mask=y), "without attn_mask"),
    (lambda s, y: F.scaled_dot_product_attention(y, y, y, dropout_p=0.5), "without attn_mask, dropout_p")])
def test_what_is_not_a_product_of_two_values_is_refused(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(_Wrap(step), input_shape=TOKENS)


@pytest.mark.parametrize("step, op", [(lambda s, y: y * s.p, "affine"), (lambda s, y: 2.0 * y, "affine"),
                                      (lambda s, y: y.mul(s.p), "affine"), (lambda s, y: y @ s.w, "linear")])
def test_a_product_with_a_constant_is_an_affine_or_linear_map_not_a_product(step, op):
    model = _Wrap(step).double()
    net = sl.Network.from_torch(model, input_shape=TOKENS)
    assert [node.op for node in net.graph.nodes] == ["conv", op]
    X = _inputs(TOKENS)
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)


def test_multihead_attention_is_refused_by_fx_naming_it():
    """torch.fx does not trace into nn.MultiheadAttention (it calls F.multi_head_attention_forward); the default
    method reads it through torch.export (tests/network/test_import_export.py)."""
    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = nn.MultiheadAttention(4, 2, batch_first=True)

        def forward(self, x):
            return self.att(x, x, x, need_weights=False)[0]
    with pytest.raises(sl.UnsupportedModelError, match=r"\(MultiheadAttention\)"):
        sl.Network.from_torch(MHA(), input_shape=(3, 4), method="fx")


def test_a_final_softmax_stays_the_output_activation_and_an_interior_one_is_a_node():
    model = nn.Sequential(nn.Linear(3, 4), nn.Softmax(dim=1), nn.Linear(4, 2), nn.Softmax(dim=-1)).double()
    net = sl.Network.from_torch(model)
    assert net.output == "softmax" and [n.op for n in net.graph.nodes] == ["linear", "softmax", "linear"]
    X = _inputs((3,))
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)


class ScaledScores(nn.Module):
    """Attention written out for export: ``softmax(q @ k^T / 2) @ v`` (ONNX MatMul, Div, Softmax, MatMul)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.q, self.k, self.v = (nn.Conv1d(TOKENS[0], 4, 1) for _ in range(3))

    def forward(self, x):
        q, k, v = (layer(x).transpose(1, 2) for layer in (self.q, self.k, self.v))
        return torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1).matmul(v).flatten(1)


def _export(model, shape, path, opset):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + shape, dtype=torch.float64),), path, dynamo=False,
                          opset_version=opset, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})


@pytest.mark.parametrize("make, shape, opset", [(Excite, IMAGE, 13), (Gates, TOKENS, 11), (ScaledScores, TOKENS, 11),
                                                (ScaledScores, TOKENS, 17)])
def test_onnx_exports_of_gates_and_attention_match_torch(tmp_path, make, shape, opset):
    pytest.importorskip("onnx")
    model, path = make().double().eval(), str(tmp_path / "m.onnx")
    _export(model, shape, path, opset)
    net = sl.Network.from_onnx(path)
    X = _inputs(shape)
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    if make is ScaledScores:
        assert [(n.op, dict(n.attrs)) for n in net.graph.nodes if n.op in ("matmul", "softmax")] == \
            [("matmul", {"alpha": 0.5}), ("softmax", {"axis": 1, "causal": False}), ("matmul", {"alpha": 1.0})]
