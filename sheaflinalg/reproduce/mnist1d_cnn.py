"""The MNIST-1D paper's CNN, trained by backpropagation in PyTorch and imported as a graph network.

The model (Greydanus' MNIST-1D benchmark): ``conv 1->25 k5 s2 p1, relu, conv 25->25 k3 s2 p1, relu,
conv 25->25 k3 s2 p1, relu, flatten, linear 125->10``, whose outputs are the logits of the ten
classes (the network's output is the identity), trained with Adam on their cross-entropy in float64
(:mod:`.backprop`: seeded, on one torch thread, torch's state restored, the network kept for a rerun).
"""

from . import backprop
from .backprop import Protocol, predictions

#: Node names of the imported network, in order (the torch module names).
LAYERS = ("conv1", "relu1", "conv2", "relu2", "conv3", "relu3", "flatten", "linear")


def build(torch, nn):
    """The untrained float64 model (weights from torch's current random state); it returns logits."""
    from collections import OrderedDict

    layers = (nn.Conv1d(1, 25, 5, stride=2, padding=1), nn.ReLU(), nn.Conv1d(25, 25, 3, stride=2, padding=1),
              nn.ReLU(), nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(125, 10))
    return nn.Sequential(OrderedDict(zip(LAYERS, layers))).to(torch.float64)


def train(data, protocol=Protocol(), progress=True):
    """Train the CNN on ``data``: ``(network, record)`` of :func:`.backprop.train`."""
    return backprop.train(data, build, protocol, "the CNN", progress)


def trained(path, data, protocol, data_key, progress=True):
    """The CNN kept at ``path`` or trained anew: ``(network, record)`` of :func:`.backprop.trained`."""
    return backprop.trained(path, data, build, protocol, data_key, "the CNN", progress)


__all__ = ["LAYERS", "Protocol", "build", "predictions", "train", "trained"]
