"""Tiny PyTorch models of every network family (issue 32), float64, seeded random weights, for dense checks.

Each family is written the way its reference implementation writes it, in operations ``torch.fx`` traces
(attention as ``F.scaled_dot_product_attention``: fx does not trace into ``nn.MultiheadAttention``):

- ``vit``: patch-embedding convolution, class token, positional embedding, a pre-LN block with two-head
  attention and a GELU MLP, a final LayerNorm and a head on the class token;
- ``gpt``: a causal decoder on token embeddings given as input vectors (pre-LN, causal two-head attention,
  GELU MLP, a final LayerNorm and the logits of every token);
- ``unet``: two levels down (convolutions, max-pools), up by bilinear upsampling and by a transposed
  convolution, skip concatenations and a 1x1 head;
- ``mobilenet``: MobileNet-V3's inverted residual (Hardswish, depthwise convolution, squeeze-and-excitation
  gated by a Hardsigmoid and a product);
- ``efficientnet``: EfficientNet's MBConv (SiLU, batch norms, squeeze-and-excitation gated by a sigmoid);
- ``convnext``: ConvNeXt's block (depthwise 7x7 convolution, channels-last LayerNorm, linear, GELU, linear,
  layer scale, residual);
- ``densenet``: BN-ReLU-convolution layers concatenating growing features, a transition with an average pool;
- ``shufflenet``: ShuffleNet-V2's unit (channel split, branch, concatenation, channel shuffle by
  view/transpose/view).

:func:`family` returns ``(model, per-sample input shape)``; the batch norms get random statistics
(:func:`helpers.torch_models.randomize_batch_norms`) so that a comparison sees them.  Every model has a few
hundred to about two thousand coordinates per sample.
"""

import torch
import torch.nn.functional as F
from torch import nn

from helpers.torch_models import randomize_batch_norms

#: The LayerNorms' eps: ``1 / sqrt(eps)`` bounds a LayerNorm's tangent over every state, and with it the heat
#: equation's stable step (torch's default 1e-5 allows ``dt`` of about 2e-5 only).
EPS = 0.25


class Attention(nn.Module):
    """Multi-head self-attention on ``(N, T, D)`` tokens: Q, K, V by one linear map, heads split by ``view``."""

    def __init__(self, dim, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (y.view(n, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(y.transpose(1, 2).reshape(n, t, d))


class Block(nn.Module):
    """A pre-LN transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))`` with a GELU MLP."""

    def __init__(self, dim, heads, hidden, causal):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=EPS), nn.LayerNorm(dim, eps=EPS)
        self.attn = Attention(dim, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """A vision transformer on ``(3, 8, 8)`` images: 4x4 patches (4 tokens and a class token), width 8."""

    def __init__(self, dim=8, classes=3):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.5 * torch.randn(1, 5, dim))
        self.block = Block(dim, 2, 2 * dim, causal=False)
        self.norm, self.head = nn.LayerNorm(dim, eps=EPS), nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)                  # (N, 4, D)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.block(x))
        return self.head(x[:, :1]).flatten(1)                         # the class token's logits


class GPT(nn.Module):
    """A causal decoder on ``(6, 8)`` token embeddings: positional embedding, one pre-LN block, logits of 10."""

    def __init__(self, tokens=6, dim=8, vocab=10):
        super().__init__()
        self.pos_embed = nn.Parameter(0.5 * torch.randn(1, tokens, dim))
        self.block = Block(dim, 2, 2 * dim, causal=True)
        self.norm, self.head = nn.LayerNorm(dim, eps=EPS), nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        return self.head(self.norm(self.block(x + self.pos_embed))).flatten(1)


def _double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """A two-level U-Net on ``(1, 8, 8)``: up by bilinear upsampling (inner) and a transposed convolution (outer)."""

    def __init__(self):
        super().__init__()
        self.down1, self.down2, self.bottom = _double_conv(1, 2), _double_conv(2, 3), _double_conv(3, 4)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec2 = _double_conv(4 + 3, 3)
        self.up1 = nn.ConvTranspose2d(3, 2, 2, stride=2)
        self.dec1 = _double_conv(2 + 2, 2)
        self.head = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        s1 = self.down1(x)                                            # (2, 8, 8)
        s2 = self.down2(F.max_pool2d(s1, 2))                          # (3, 4, 4)
        b = self.bottom(F.max_pool2d(s2, 2))                          # (4, 2, 2)
        d2 = self.dec2(torch.cat([self.up2(b), s2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), s1], dim=1))
        return self.head(d1).flatten(1)


class SqueezeExcite(nn.Module):
    """``x * gate(W2 act(W1 mean(x)))``: the gate a Hardsigmoid (MobileNet-V3) or a sigmoid (EfficientNet)."""

    def __init__(self, channels, squeezed, act, gate):
        super().__init__()
        self.pool, self.act, self.gate = nn.AdaptiveAvgPool2d(1), act, gate
        self.fc1, self.fc2 = nn.Conv2d(channels, squeezed, 1), nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


def _conv_bn(cin, cout, k, act, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), act)


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (3x3), squeeze-excite, project (1x1, no activation), residual."""

    def __init__(self, channels, expanded, act, se):
        super().__init__()
        self.expand = _conv_bn(channels, expanded, 1, act)
        self.depthwise = _conv_bn(expanded, expanded, 3, act, groups=expanded)
        self.se, self.project = se, _conv_bn(expanded, channels, 1, nn.Identity())

    def forward(self, x):
        return x + self.project(self.se(self.depthwise(self.expand(x))))


class MobileNet(nn.Module):
    """MobileNet-V3-like on ``(3, 8, 8)``: a Hardswish stem of stride 2, one inverted residual with SE, a head."""

    def __init__(self):
        super().__init__()
        self.stem = _conv_bn(3, 4, 3, nn.Hardswish(), stride=2)
        self.block = InvertedResidual(4, 8, nn.Hardswish(), SqueezeExcite(8, 4, nn.ReLU(), nn.Hardsigmoid()))
        self.pool, self.head = nn.AdaptiveAvgPool2d(1), nn.Sequential(nn.Linear(4, 6), nn.Hardswish(), nn.Linear(6, 3))

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.block(self.stem(x))), 1))


class EfficientNet(nn.Module):
    """EfficientNet-like on ``(3, 8, 8)``: a SiLU stem of stride 2, one MBConv with a sigmoid-gated SE, a head."""

    def __init__(self):
        super().__init__()
        self.stem = _conv_bn(3, 4, 3, nn.SiLU(), stride=2)
        self.block = InvertedResidual(4, 8, nn.SiLU(), SqueezeExcite(8, 2, nn.SiLU(), nn.Sigmoid()))
        self.pool, self.head = nn.AdaptiveAvgPool2d(1), nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.block(self.stem(x))), 1))


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, channels last, LayerNorm, linear x4, GELU, linear, layer scale, channels first, residual."""

    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=EPS)
        self.fc1, self.act, self.fc2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(self.act(self.fc1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt-like on ``(3, 8, 8)``: a 2x2 patchify stem, one block, global mean, LayerNorm and head."""

    def __init__(self, dim=4):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 2, stride=2)
        self.block = ConvNeXtBlock(dim)
        self.norm, self.head = nn.LayerNorm(dim, eps=EPS), nn.Linear(dim, 3)

    def forward(self, x):
        return self.head(self.norm(self.block(self.stem(x)).mean(dim=(2, 3))))


class DenseLayer(nn.Module):
    """BN, ReLU, 3x3 convolution to ``growth`` new channels, concatenated to the input."""

    def __init__(self, channels, growth):
        super().__init__()
        self.bn, self.conv = nn.BatchNorm2d(channels), nn.Conv2d(channels, growth, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.cat([x, self.conv(F.relu(self.bn(x)))], dim=1)


class DenseNet(nn.Module):
    """DenseNet-like on ``(3, 8, 8)``: a stem, a dense block of two layers (growth 2), a transition, a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.dense = nn.Sequential(DenseLayer(4, 2), DenseLayer(6, 2))
        self.transition = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1, bias=False), nn.AvgPool2d(2))
        self.norm, self.head = nn.BatchNorm2d(4), nn.Linear(4, 3)

    def forward(self, x):
        y = F.relu(self.norm(self.transition(self.dense(self.stem(x)))))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def channel_shuffle(x, groups):
    """ShuffleNet's channel shuffle: ``view`` into groups, swap the group and channel axes, ``view`` back."""
    n, c, h, w = x.size()
    x = x.view(n, groups, c // groups, h, w)
    return torch.transpose(x, 1, 2).contiguous().view(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet-V2's unit of stride 1: split the channels, one half through a branch, concatenate, shuffle."""

    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.branch = nn.Sequential(_conv_bn(half, half, 1, nn.ReLU()), _conv_bn(half, half, 3, nn.Identity(),
                                    groups=half), _conv_bn(half, half, 1, nn.ReLU()))

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        return channel_shuffle(torch.cat((x1, self.branch(x2)), dim=1), 2)


class ShuffleNet(nn.Module):
    """ShuffleNet-like on ``(3, 8, 8)``: a stem, two shuffle units, global mean and a head."""

    def __init__(self):
        super().__init__()
        self.stem = _conv_bn(3, 6, 3, nn.ReLU())
        self.units = nn.Sequential(ShuffleUnit(6), ShuffleUnit(6))
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.units(self.stem(x)).mean([2, 3]))


IMAGE = (3, 8, 8)
#: ``{family: (model class, per-sample input shape)}``.
FAMILIES = {"vit": (ViT, IMAGE), "gpt": (GPT, (6, 8)), "unet": (UNet, (1, 8, 8)), "mobilenet": (MobileNet, IMAGE),
            "efficientnet": (EfficientNet, IMAGE), "convnext": (ConvNeXt, IMAGE), "densenet": (DenseNet, (3, 6, 6)),
            "shufflenet": (ShuffleNet, (3, 4, 4))}


def family(name, seed=0):
    """``(model, input shape)``: the family ``name``'s tiny model, float64, eval mode, seeded random weights and
    batch-norm statistics; the caller's random state is left as it was.

    Examples
    --------
    >>> model, shape = family("vit")                # doctest: +SKIP
    >>> model(torch.zeros((2,) + shape, dtype=torch.float64)).shape
    torch.Size([2, 3])
    """
    make, shape = FAMILIES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make()
    return randomize_batch_norms(model, seed).double().eval(), shape
