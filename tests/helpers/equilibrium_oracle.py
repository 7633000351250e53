"""A test-only equilibrium oracle: backpropagation's gradient (the nudging -> 0 limit) under the contract.

It implements :class:`sheaflinalg.training.equilibrium.oracle.EquilibriumOracle` with plain numpy
backpropagation on chains (written here from the forward pass) and the library's backward substitution
on graph networks (``backpropagation.descent_direction``), so that the training loop can be tested apart from
the exact equilibria: ``g`` is the gradient of the batch's mean loss, plus ``nudging * bias`` when a
``bias`` vector is given (an odd first-order bias that symmetric nudging must cancel).
"""

import numpy as np

from sheaflinalg.network.model import Network
from sheaflinalg.training.equilibrium.oracle import EquilibriumOracle, SettleReport
from sheaflinalg.training.backpropagation import descent_direction
from sheaflinalg.training.velocity import GraphParameters


def output_and_derivative(output, loss, z, Y):
    """``(P, dL/dz)`` of the batch's mean loss (the reported one) at the output pre-activation ``z``."""
    n, k = z.shape
    if output == "identity":
        P = z
    elif output == "sigmoid":
        P = 1.0 / (1.0 + np.exp(-z))
    else:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        P = e / e.sum(axis=1, keepdims=True)
    if loss == "cross_entropy":
        return P, (P - Y) / n
    dP = 2.0 * (P - Y) / (n * k)
    if output == "identity":
        return P, dP
    if output == "sigmoid":
        return P, dP * P * (1.0 - P)
    return P, P * (dP - np.sum(dP * P, axis=1, keepdims=True))


def chain_gradient(theta, dims, output, loss, X, Y):
    """Backpropagation on a chain of Linear/ReLU layers: the gradient of the mean loss, flat."""
    net = Network.from_parameters(theta, dims, output)
    acts, zs, a = [X], [], X
    for l, (W, b) in enumerate(zip(net.weights, net.biases)):
        z = a @ W.T + b
        zs.append(z)
        a = np.maximum(z, 0.0) if l < len(net.weights) - 1 else z
        acts.append(a)
    _, dz = output_and_derivative(output, loss, zs[-1], Y)
    grads = []
    for l in range(len(net.weights) - 1, -1, -1):
        grads.append(np.concatenate([(dz.T @ acts[l]).ravel(), dz.sum(axis=0)]))
        if l:
            dz = (dz @ net.weights[l]) * (zs[l - 1] > 0)
    return np.concatenate(grads[::-1])


class BackpropOracle(EquilibriumOracle):
    """Backprop's gradient of the batch's mean loss; optional odd bias, unsettled counts and a call log."""

    def __init__(self, net, loss, bias=None, unsettled=0):
        self.net, self.loss, self.bias, self.unsettled = net, loss, bias, unsettled
        self.params = GraphParameters(net.graph) if net.is_graph else None
        self.calls = []

    def gradient(self, theta, X, Y, nudging, out):
        self.calls.append((X.shape[0], nudging))
        if self.params is not None:
            descent_direction(self.params.graph(theta), X, Y, self.loss, params=self.params, out=out)
            out *= -1.0
        else:
            out[:] = chain_gradient(theta, self.net.dims, self.net.output, self.loss, X, Y)
        if self.bias is not None:
            out += nudging * self.bias
        return SettleReport(iterations=1, unsettled=self.unsettled, sliding=0, energy=0.0)


def use_backprop_oracle(monkeypatch, **kw):
    """Make ``train(method="equilibrium")`` use :class:`BackpropOracle`; returns the list of oracles built."""
    from sheaflinalg.training.equilibrium import run

    built = []

    def make(prob, cfg):
        built.append(BackpropOracle(prob.net, prob.loss, **kw))
        return built[-1]

    monkeypatch.setattr(run, "make_oracle", make)
    return built
