"""PyTorch models read through ``torch.export`` (``Network.from_torch(method="export")``), against torch float64.

Small hand-written models, each exercising a few ATen converters (importers/aten_*.py): the harmonic
extension of the imported network on a batch of three (the export runs on two) is the model's own forward
pass to 1e-12 relative.  Refusals name the node and its ATen op (control flow on the data, a random op, a
value mixing the samples, a mutated buffer); ``method="export"`` and ``method="fx"`` give the same graph on a
model both read; ``method="auto"`` reads through torch.export what torch.fx does not trace.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

RTOL = 1e-12


def exported(model, shape, method="export"):
    """``(network, relative error of its harmonic extension against the model on three samples)``."""
    model = model.double().eval()
    net = sl.Network.from_torch(model, input_shape=shape, method=method)
    X = np.random.default_rng(3).standard_normal((3,) + tuple(shape))
    expected = reference(model, X)
    ours = sl.harmonic_extension(net, X).output
    return net, float(np.abs(ours - expected).max() / np.abs(expected).max())


class Lambda(nn.Module):
    """``f(self, x)`` with the layers ``layers`` (a dict) as attributes."""

    def __init__(self, f, **layers):
        super().__init__()
        torch.manual_seed(0)
        self.f = f
        for key, layer in layers.items():
            setattr(self, key, layer)

    def forward(self, x):
        return self.f(self, x)


def _conv1d_style(m, x):
    """Hugging Face's Conv1D: rows of the flattened ``(batch * sequence, width)`` view times a matrix (addmm)."""
    h = torch.addmm(m.b, x.reshape(-1, x.shape[-1]), m.W).view(x.shape[0], x.shape[1], -1)
    return h.relu() @ m.W2          # matmul with a constant: linear on the last axis


def _attention_written_out(m, x):
    q, k, v = m.qkv(x).split(4, dim=-1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(4)
    return torch.softmax(scores, dim=-1) @ v


def _heads(m, x):
    q, k, v = (t.view(x.shape[0], x.shape[1], 2, 3).transpose(1, 2) for t in m.qkv(x).chunk(3, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 6)


def _masked(m, x):
    n = x.shape[1]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    q, k, v = m.qkv(x).chunk(3, dim=-1)
    causal = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    additive = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.arange(n, dtype=x.dtype) / n)
    filled = (q @ k.transpose(-1, -2)).masked_fill(~mask, -1e4).softmax(-1) @ v
    return causal + additive + filled


def _arithmetic(m, x):
    y = (x * 2.0 - 1.0) / 4.0 + m.scale * x - (1.5 - x)
    return y * torch.sigmoid(y) - (y - x) + y.pow(2) + y ** 3


def _plumbing(m, x):
    h = m.conv(x)                                        # (C, H, W)
    t = h.flatten(2).transpose(1, 2)                     # (HW, C) tokens
    t = torch.cat([m.token.expand(x.shape[0], -1, -1), t], dim=1)
    a, b = t.split([2, 2], dim=-1)
    t = torch.cat([b, a * t[:, :, 1:3]], dim=-1).permute(0, 2, 1)         # (C, 1 + HW)
    u = (t[:, 0] + t[:, 1:3].sum(1)) * t.mean(dim=(1, 2), keepdim=True).squeeze(-1)
    return torch.stack([u, t[:, 3]], -1)


def _positions(m, x):
    positions = m.wpe(torch.arange(x.shape[1]))
    return m.ln(x + positions) + m.rms(x) + m.gn(x.transpose(1, 2)).transpose(1, 2)


def _layers(m, x):
    h = m.bn(m.conv(F.pad(x, (1, 2, 0, 1))))
    h = F.max_pool2d(F.relu(h), 2, ceil_mode=True) + F.avg_pool2d(h, 2, ceil_mode=True)[..., :h.shape[-2] // 2 + 1,
                                                                                           :h.shape[-1] // 2 + 1]
    h = F.interpolate(h, scale_factor=2) + F.interpolate(h, scale_factor=2, mode="bilinear")
    return F.adaptive_avg_pool2d(torch.roll(h, 1, dims=-1), 2).flatten(1)


def _channels_last(m, x):
    """Padding ``(H, W, C)`` values on H and W (Swin's windows), and a padding by nothing."""
    return F.pad(F.pad(x.permute(0, 2, 3, 1), (0, 0, 1, 2, 0, 1)), (0, 0, 0, 0)) * m.scale


def _activations(m, x):
    y = m.fc(x)
    return (F.gelu(y) + F.gelu(y, approximate="tanh") + F.silu(y) + torch.tanh(y) + F.hardswish(y)
            + F.hardtanh(y) + F.relu6(y) + F.leaky_relu(y, 0.1) + F.elu(y) + F.softplus(y) + F.mish(y)
            + F.hardsigmoid(y) + y.clamp(-0.5, 0.5))


MODELS = {"linear": (nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3)), (5,)),
          "linear on sequences": (nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)), (6, 5)),
          "addmm on flattened rows": (Lambda(_conv1d_style, W=nn.Parameter(torch.randn(5, 4)),
                                             b=nn.Parameter(torch.randn(4)), W2=nn.Parameter(torch.randn(4, 3))),
                                      (6, 5)),
          "attention written out": (Lambda(_attention_written_out, qkv=nn.Linear(5, 12)), (6, 5)),
          "heads, causal attention": (Lambda(_heads, qkv=nn.Linear(5, 18)), (7, 5)),
          "attention masks": (Lambda(_masked, qkv=nn.Linear(5, 12)), (6, 5)),
          "multi-head attention": (Lambda(lambda m, x: m.mha(x, x, x, need_weights=False)[0],
                                          mha=nn.MultiheadAttention(6, 2, batch_first=True)), (5, 6)),
          "arithmetic": (Lambda(_arithmetic, scale=nn.Parameter(torch.randn(4))), (3, 4)),
          "plumbing": (Lambda(_plumbing, conv=nn.Conv2d(1, 4, 3, stride=2), token=nn.Parameter(torch.randn(1, 1, 4))),
                       (1, 7, 7)),
          "positions and norms": (Lambda(_positions, wpe=nn.Embedding(8, 4), ln=nn.LayerNorm(4), rms=nn.RMSNorm(4),
                                         gn=nn.GroupNorm(2, 4)), (6, 4)),
          "layers": (Lambda(_layers, conv=nn.Conv2d(2, 3, 3), bn=nn.BatchNorm2d(3)), (2, 7, 6)),
          "channels-last pads": (Lambda(_channels_last, scale=nn.Parameter(torch.randn(2))), (2, 3, 4)),
          "activations": (Lambda(_activations, fc=nn.Linear(4, 5)), (4,)),
          "final softmax": (nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=-1)), (4,))}


@pytest.mark.parametrize("key", MODELS)
def test_exported_model_extension_is_its_forward_pass(key):
    model, shape = MODELS[key]
    net, error = exported(model, shape)
    assert error <= RTOL


def test_a_multi_head_attention_is_read_through_export_by_auto():
    model, shape = MODELS["multi-head attention"]
    with pytest.raises(sl.UnsupportedModelError, match="MultiheadAttention"):
        sl.Network.from_torch(model.double(), input_shape=shape, method="fx")
    net, error = exported(model, shape, method="auto")
    assert error <= RTOL and "matmul" in {node.op for node in net.graph.nodes}


def test_export_and_fx_give_the_same_graph():
    from helpers.torch_models import small_resnet

    model = small_resnet().double().eval()
    shape = (3, 8, 8)
    fx, exp = (sl.Network.from_torch(model, input_shape=shape, method=m).graph for m in ("fx", "export"))
    assert [(n.name, n.op, n.inputs, n.attrs) for n in fx.nodes] == [(n.name, n.op, n.inputs, n.attrs)
                                                                       for n in exp.nodes]
    assert all(np.array_equal(a.params[k], b.params[k]) for a, b in zip(fx.nodes, exp.nodes) for k in a.params)
    assert fx.output == exp.output


class Branching(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


class BufferCount(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls.add_(1)
        return x * 2


REFUSED = {"control flow on the data": (Branching(), "torch.export cannot export Branching"),
           "random op": (Lambda(lambda m, x: x + torch.randn_like(x)), "randn.* is random"),
           "dropout in training": (Lambda(lambda m, x: F.dropout(x, 0.5, training=True)), "is random"),
           "mixing the batch": (Lambda(lambda m, x: x - x.mean(0)), r"mean.dim.*holds the samples of the batch"),
           "a product over the batch": (Lambda(lambda m, x: x.t() @ x), "hold the samples of the batch differently"),
           "the batch moved": (Lambda(lambda m, x: x.reshape(1, -1) * 2), "output holds the samples .* in dim 1"),
           "a mutated buffer": (BufferCount(), "mutates calls in place"),
           "a quotient of values": (Lambda(lambda m, x: x / (x * x + 1)), "quotient of two values"),
           "an unsupported op": (Lambda(lambda m, x: torch.erf(x)), r"'erf' \(aten.erf.default\) is not supported")}


@pytest.mark.parametrize("key", REFUSED)
def test_export_refuses_what_is_not_one_feedforward_network(key):
    model, message = REFUSED[key]
    with pytest.raises(sl.UnsupportedModelError, match=message):
        sl.Network.from_torch(model.double(), input_shape=(4,), method="export")


def test_method_and_input_shape_are_checked_first():
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="method must be one of 'auto', 'fx', 'export', got 'onnx'"):
        sl.Network.from_torch(model, input_shape=(3,), method="onnx")
    with pytest.raises(ValueError, match="input_shape is required"):
        sl.Network.from_torch(model, method="export")


def test_auto_keeps_fx_refusals_that_export_does_not_lift():
    # a model fx cannot trace and export refuses: fx's reason first, then export's
    with pytest.raises(sl.UnsupportedModelError, match="torch.fx cannot trace.*torch.export cannot export"):
        sl.Network.from_torch(Branching(), input_shape=(4,))
