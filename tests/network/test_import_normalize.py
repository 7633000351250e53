"""``F.normalize`` (the ``normalize`` op) imported from PyTorch through torch.fx and torch.export, against torch
float64: a normalised hidden layer (some vectors clamped at eps), Swin V2's cosine attention (normalised
queries and keys, a clamped exponential of a learned logit scale, a relative-position bias from an MLP on a
constant table), and refusals (another p or dim, a vector norm outside the pattern)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

RTOL = 1e-12


def imported(model, shape, method, scale=1.0):
    """``(network, relative error of its harmonic extension against the model on four samples)``."""
    model = model.double().eval()
    net = sl.Network.from_torch(model, input_shape=shape, method=method)
    X = scale * np.random.default_rng(5).standard_normal((4,) + tuple(shape))
    expected = reference(model, X)
    ours = sl.harmonic_extension(net, X).output
    return net, float(np.abs(ours - expected).max() / np.abs(expected).max())


class Hidden(nn.Module):
    """``fc2(normalize(fc1(x), dim, eps))`` on tokens ``(3, 4)``."""

    def __init__(self, eps=1e-12, dim=-1, p=2.0):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2, self.eps, self.dim, self.p = nn.Linear(4, 5), nn.Linear(5, 2), eps, dim, p

    def forward(self, x):
        return self.fc2(F.normalize(self.fc1(x), p=self.p, dim=self.dim, eps=self.eps))


class CosineAttention(nn.Module):
    """One head of Swin V2's attention on ``n`` tokens of width ``d``: ``softmax(cos(q, k) * min(exp(s), 100)
    + 16 sigmoid(mlp(table))) v``, the bias an MLP of a constant table of relative positions."""

    def __init__(self, n=4, d=6):
        super().__init__()
        torch.manual_seed(1)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(1)))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1, bias=False))
        offsets = torch.arange(n, dtype=torch.float32)[:, None] - torch.arange(n, dtype=torch.float32)[None, :]
        self.register_buffer("table", torch.stack([offsets, offsets.abs()], dim=-1) / n)

    def forward(self, x):
        q, k, v = self.qkv(x).split(x.shape[-1], dim=-1)
        scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        scores = scores * torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        scores = scores + 16 * torch.sigmoid(self.cpb_mlp(self.table)[..., 0])
        return self.proj(torch.softmax(scores, dim=-1) @ v)


@pytest.mark.parametrize("method", ["fx", "export"])
@pytest.mark.parametrize("eps", [1e-12, 1.5])
def test_a_normalised_layer_is_its_torch_forward_pass(method, eps):
    net, error = imported(Hidden(eps), (3, 4), method)
    assert error <= RTOL
    (node,) = [n for n in net.graph.nodes if n.op == "normalize"]
    assert node.attrs["eps"] == eps


def test_clamped_vectors_follow_torch():
    # small inputs: fc1's outputs near its bias, whose norm is about eps, on both sides of it
    model = Hidden(eps=0.6)
    net, error = imported(model, (3, 4), "export", scale=0.05)
    norms = model.fc1(0.05 * torch.from_numpy(np.random.default_rng(5).standard_normal((4, 3, 4)))).norm(dim=-1)
    assert (norms < 0.6).any() and (norms > 0.6).any() and error <= RTOL


def test_cosine_attention_is_read_through_export_by_auto():
    model = CosineAttention()
    with pytest.raises(sl.UnsupportedModelError, match="combines the network's values with the constant"):
        sl.Network.from_torch(model.double(), input_shape=(4, 6), method="fx")
    net, error = imported(model, (4, 6), "auto")
    ops = [n.op for n in net.graph.nodes]
    assert error <= RTOL and ops.count("normalize") == 2 and "softmax" in ops


def test_export_and_fx_give_the_same_normalised_graph():
    fx, exp = (sl.Network.from_torch(Hidden().double(), input_shape=(3, 4), method=m).graph for m in ("fx", "export"))
    assert [(n.op, n.attrs) for n in fx.nodes] == [(n.op, n.attrs) for n in exp.nodes]


def _bare_norm(m, x):
    return x * torch.linalg.vector_norm(x, dim=-1, keepdim=True)


class Lambda(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(self, x)


#: ``{case: (model, torch.fx's refusal, torch.export's)}``.
REFUSED = {"p=1": (Hidden(p=1.0), "only the L2 norm", "vector norm is supported only as F.normalize's"),
           "dim=1": (Hidden(dim=1), "only the last axis", "only the last axis"),
           "a norm outside F.normalize": (Lambda(_bare_norm), "no sparse restriction map",
                                          "vector norm is supported only as F.normalize's")}


@pytest.mark.parametrize("key", REFUSED)
@pytest.mark.parametrize("method", ["fx", "export"])
def test_refusals(key, method):
    model, fx, export = REFUSED[key]
    with pytest.raises(sl.UnsupportedModelError, match=fx if method == "fx" else export):
        sl.Network.from_torch(model.double(), input_shape=(3, 4), method=method)
