"""Two small MNIST-1D networks with smooth nodes (issue 32), as float64 torch models that ``sl.Network.from_torch``
imports: a 1-D vision transformer and an EfficientNet-like CNN (``graph_training_smooth.py`` trains them).

* ``vit``: the 40 samples cut into 8 patches of 5 (a ``Conv1d`` of stride 5 on one channel), dimension 32,
  a learned positional embedding, 2 pre-LN blocks (``LayerNorm``, 2-head attention by
  ``F.scaled_dot_product_attention``, ``LayerNorm``, a GELU MLP 32 -> 64 -> 32, residuals), a final
  ``LayerNorm``, the mean over the patches and a linear head 32 -> 10.
* ``effnet``: a stem ``Conv1d`` 1 -> 16 (k5, s2), batch norm, SiLU, then MBConv blocks (1x1 expansion conv,
  batch norm, SiLU, depthwise conv, batch norm, SiLU, squeeze-and-excitation gate (mean, 1x1 conv, SiLU,
  1x1 conv, sigmoid, product), 1x1 projection conv, batch norm, the residual when the shapes agree), the
  mean over positions and a linear head 24 -> 10.  Batch norm runs in eval mode (its running statistics,
  an affine map: what the importer reads), in both libraries.
"""

import torch
import torch.nn.functional as F
from torch import nn

SHAPES = {"vit": (1, 40), "effnet": (1, 40)}


class Block(nn.Module):
    """A pre-LN transformer block on ``(N, T, D)`` tokens: attention, then a GELU MLP, each with a residual."""

    def __init__(self, tokens, dim, heads, hidden):
        super().__init__()
        self.shape = (tokens, heads, dim // heads)
        self.ln1, self.ln2 = (nn.LayerNorm(dim, elementwise_affine=False) for _ in range(2))
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = (layer(h).reshape((-1,) + self.shape).transpose(1, 2) for layer in (self.q, self.k, self.v))
        att = F.scaled_dot_product_attention(q, k, v)                    # (N, H, T, D / H)
        x = x + self.out(att.transpose(1, 2).reshape(-1, self.shape[0], self.shape[1] * self.shape[2]))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    """The ``vit`` of the module docstring."""

    def __init__(self, patch=5, dim=32, heads=2, blocks=2, hidden=64, classes=10, length=40):
        super().__init__()
        self.embed = nn.Conv1d(1, dim, patch, stride=patch)
        self.position = nn.Parameter(0.02 * torch.randn(length // patch, dim))
        self.blocks = nn.Sequential(*(Block(length // patch, dim, heads, hidden) for _ in range(blocks)))
        self.norm, self.head = nn.LayerNorm(dim, elementwise_affine=False), nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).transpose(1, 2) + self.position        # (N, T, D)
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


class MBConv(nn.Module):
    """An inverted residual block with a squeeze-and-excitation gate (1-D)."""

    def __init__(self, c_in, c_out, expand, kernel, stride):
        super().__init__()
        hidden, squeezed = c_in * expand, max(1, c_in // 4)
        self.expand = nn.Sequential(nn.Conv1d(c_in, hidden, 1), nn.BatchNorm1d(hidden), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv1d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden),
                                       nn.BatchNorm1d(hidden), nn.SiLU())
        self.squeeze, self.excite = nn.Conv1d(hidden, squeezed, 1), nn.Conv1d(squeezed, hidden, 1)
        self.project = nn.Sequential(nn.Conv1d(hidden, c_out, 1), nn.BatchNorm1d(c_out))
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        h = self.depthwise(self.expand(x))
        h = h * torch.sigmoid(self.excite(F.silu(self.squeeze(h.mean(dim=2, keepdim=True)))))
        h = self.project(h)
        return x + h if self.residual else h


class EffNet(nn.Module):
    """The ``effnet`` of the module docstring: stem 1 -> 16 (length 40 -> 20), MBConv 16 -> 16, 16 -> 24
    (stride 2: length 10), 24 -> 24, pooling, head."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(1, 16, 5, 2, 2), nn.BatchNorm1d(16), nn.SiLU())
        self.blocks = nn.Sequential(MBConv(16, 16, 2, 3, 1), MBConv(16, 24, 2, 3, 2), MBConv(24, 24, 2, 3, 1))
        self.head = nn.Linear(24, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=2))


def build(arch, seed):
    """The float64 model ``arch`` ("vit" or "effnet") in eval mode, its weights from ``seed`` (torch's global
    random state is forked, so the caller's is left as it was); it returns logits."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = {"vit": ViT, "effnet": EffNet}[arch]()
    return model.to(torch.float64).eval()
