"""The gradient-descent baseline: gradients against central finite differences of the reported loss."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import naive
from helpers.strategies import networks
import sheaflinalg as sl


def dense_loss(net, X, Y, loss, p):
    """The mean loss written from scratch on naive.forward (no sheaflinalg loss code)."""
    P = np.array([naive.forward(net.weights, net.biases, net.output, x)[2] for x in X])
    D = P - Y
    if loss == "cross_entropy":
        if net.output == "sigmoid":
            return -np.mean(np.sum(Y * np.log(P) + (1 - Y) * np.log(1 - P), axis=1))
        return -np.mean(np.sum(Y * np.log(P), axis=1))
    if loss == "mse":
        return np.mean(D ** 2)
    if loss == "l1":
        return np.mean(np.abs(D))
    if loss == "pnorm":
        return np.mean(np.abs(D) ** p) / p
    return np.mean(np.where(np.abs(D) <= p, 0.5 * D ** 2, p * (np.abs(D) - 0.5 * p)))


@st.composite
def cases(draw):
    net, seed = draw(networks(max_hidden=3, max_width=6))
    rng = np.random.default_rng(seed)
    M = draw(st.integers(1, 6))
    X = rng.uniform(-2, 2, size=(M, net.dims[0]))
    n = net.dims[-1]
    if net.output == "softmax":
        return net, X, np.eye(n)[rng.integers(0, n, M)], "cross_entropy", None
    if net.output == "sigmoid" and draw(st.booleans()):
        return net, X, (rng.random((M, n)) < 0.5).astype(float), "cross_entropy", None
    loss = draw(st.sampled_from(["mse", "l1", "pnorm", "huber"]))
    p = {"pnorm": 2.5, "huber": 0.4}.get(loss)
    return net, X, rng.normal(size=(M, n)), loss, p


@given(cases())
@settings(max_examples=40)
def test_gradient_matches_finite_differences(case):
    net, X, Y, loss, p = case
    lr = 1e-3
    fit = sl.sgd(net, X, Y, lr=lr, epochs=1, loss=loss, loss_param=p, progress=False)
    grad = (net.parameters() - fit.network.parameters()) / lr
    theta = net.parameters()
    h = 1e-6
    fd = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        up = sl.Network.from_parameters(theta + e, net.dims, net.output)
        dn = sl.Network.from_parameters(theta - e, net.dims, net.output)
        fd[i] = (dense_loss(up, X, Y, loss, p) - dense_loss(dn, X, Y, loss, p)) / (2 * h)
    # Kinks (ReLU at 0, |d| at 0, Huber threshold) make finite differences unreliable there.
    zs, _ = net.forward_states(X)
    if any(np.min(np.abs(z)) < 1e-4 for z in zs[:-1]):
        return
    if loss in ("l1", "huber") and np.min(np.abs(np.abs(net.forward(X) - Y) - (p or 0.0))) < 1e-4:
        return
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_weight_decay_and_history():
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 4, 1], seed=1)
    plain = sl.sgd(net, X, Y, lr=0.01, epochs=1, progress=False).network.parameters()
    mu = 0.3
    decayed = sl.sgd(net, X, Y, lr=0.01, epochs=1, reg={"mu": mu}, progress=False).network.parameters()
    np.testing.assert_allclose(decayed, plain - 0.01 * mu * net.parameters(), atol=1e-14)
    anchored = sl.sgd(net, X, Y, lr=0.01, epochs=1, reg={"mu": mu, "anchor": "initial"}, progress=False)
    np.testing.assert_allclose(anchored.network.parameters(), plain, atol=1e-14)
    l1 = sl.sgd(net, X, Y, lr=0.01, epochs=1, reg={"mu": mu, "kind": "l1"}, progress=False)
    np.testing.assert_allclose(l1.network.parameters(), plain - 0.01 * mu * np.sign(net.parameters()), atol=1e-14)
    fit = sl.sgd(net, X, Y, X, Y, epochs=250, record_every=100, progress=False)
    h = fit.history
    assert h.method == "sgd" and h.epoch == [0, 100, 200, 250]
    assert h.train_loss == h.test_loss
    assert h.train_loss[-1] == pytest.approx(np.mean((fit.network.forward(X) - Y) ** 2), rel=1e-12)
    assert h.discord == [None] * 4


def test_sgd_callback_counts_epochs():
    X, Y = sl.tasks.blobs(40, seed=0)
    net = sl.Network.random([2, 5, 4], seed=0, output="softmax")
    seen = []
    sl.sgd(net, X, Y, epochs=30, record_every=10, callback=lambda i: seen.append(
        (i.method, i.epoch, i.step, i.state, len(i.history))), callback_every=15, progress=False)
    assert seen == [("sgd", 15, 15, None, 2), ("sgd", 30, 30, None, 4)]


def test_sgd_bad_input_and_divergence():
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 4, 1], seed=1)
    with pytest.raises(ValueError, match="lr"):
        sl.sgd(net, X, Y, lr=0.0, progress=False)
    with pytest.raises(ValueError, match="state"):
        sl.sgd(net, X, Y, reg={"lam": 1.0}, progress=False)
    with pytest.raises(ValueError, match="shape"):
        sl.sgd(net, X, Y.T, progress=False)
    with pytest.warns(sl.DivergenceWarning, match="epoch"):
        fit = sl.sgd(net, X, Y * 1e3, lr=10.0, epochs=2000, record_every=1, progress=False)
    assert fit.history.diverged and np.all(np.isfinite(fit.network.parameters()))
