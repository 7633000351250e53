"""A stand-in for torchvision's ``stochastic_depth`` (torchvision need not import): the same module and
function name, the same signature, wrapped for torch.fx as torchvision wraps it, and a residual block that
calls it the way torchvision's ``StochasticDepth`` module does."""

import torch
from torch import nn


def stochastic_depth(input, p, mode, training=True):
    """Zero the whole input with probability ``p`` per sample (``mode="row"``) in training; the identity else."""
    if not training or p == 0.0:
        return input
    keep = (torch.rand((input.shape[0],) + (1,) * (input.dim() - 1)) >= p).to(input.dtype)
    return input * keep / (1.0 - p)


stochastic_depth.__module__ = "torchvision.ops.stochastic_depth"
torch.fx.wrap("stochastic_depth")


class DropPathBlock(nn.Module):
    """``x + stochastic_depth(relu(fc(x)))``, as a ConvNeXt block drops its branch."""

    def __init__(self, width, p=0.2):
        super().__init__()
        torch.manual_seed(0)
        self.fc, self.p = nn.Linear(width, width), p

    def forward(self, x):
        return x + stochastic_depth(torch.relu(self.fc(x)), self.p, "row", self.training)
