"""``train(method="equilibrium")``: mini-batches, optimisers, schedules, symmetric nudging, history,
checkpoints, callbacks and bad input, on a test-only oracle (backprop's gradient: the nudging -> 0
limit, tests/helpers/equilibrium_oracle.py) so that the loop is tested apart from the exact equilibria."""

import csv
import dataclasses
import math
import warnings

import numpy as np
import pytest

from helpers.equilibrium_oracle import BackpropOracle, chain_gradient, use_backprop_oracle
from helpers.graph_examples import every_op_network
import sheaflinalg as sl
from sheaflinalg.cli import main
from sheaflinalg.training.equilibrium import UnsettledWarning
from sheaflinalg.training.equilibrium import run as run_module
from sheaflinalg.training.equilibrium.loss_edge import NudgingTooNegative
from sheaflinalg.training.history import History
from sheaflinalg.training.velocity import GraphParameters

X_BLOBS, Y_BLOBS = sl.tasks.blobs(240, seed=0)
NET = sl.Network.random([2, 12, 4], seed=1, output="softmax")
QUICK = dict(method="equilibrium", epochs=3, batch_size=50, seed=0, progress=False)


def naive_adam_run(net, X, Y, epochs, batch_size, lr, seed, warmup, loss):
    """Mini-batch Adam with a warmed-up cosine rate, written from the formulas."""
    rng, theta = np.random.default_rng(seed), net.parameters()
    m, v, t, n = np.zeros_like(theta), np.zeros_like(theta), 0, X.shape[0]
    total = epochs * math.ceil(n / batch_size)
    for _ in range(epochs):
        order = rng.permutation(n)
        for i in range(0, n, batch_size):
            rows = order[i:i + batch_size]
            g = chain_gradient(theta, net.dims, net.output, loss, X[rows], Y[rows])
            rate = lr * ((t + 1) / (warmup + 1) if t < warmup
                         else 0.5 * (1 + math.cos(math.pi * (t - warmup) / (total - warmup))))
            t += 1
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            theta = theta - rate * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return theta


@pytest.mark.parametrize("batch_size", [64, 240])
def test_the_loop_is_minibatch_adam_on_the_oracle_gradient(monkeypatch, batch_size):
    use_backprop_oracle(monkeypatch)
    fit = sl.train(NET, X_BLOBS, Y_BLOBS, method="equilibrium", epochs=4, batch_size=batch_size, lr=0.01,
                   schedule=sl.optim.Cosine(warmup=3), seed=5, progress=False)
    want = naive_adam_run(NET, X_BLOBS, Y_BLOBS, 4, batch_size, 0.01, 5, 3, "cross_entropy")
    np.testing.assert_allclose(fit.network.parameters(), want, rtol=1e-11, atol=1e-13)
    assert fit.history.step == [0] + [k * math.ceil(240 / batch_size) for k in range(1, 5)]


def test_the_issues_call_learns_a_small_mlp(monkeypatch):
    use_backprop_oracle(monkeypatch)
    X, Y = sl.tasks.blobs(400, seed=3)
    y = np.argmax(Y, axis=1)
    fit = sl.train(NET, X[:300], y[:300], X[300:], y[300:], method="equilibrium", epochs=15, batch_size=100,
                   optimizer="adam", lr=1e-2, seed=0, progress=False)
    h = fit.history
    assert h.method == "equilibrium" and h.epoch == list(range(16))
    assert h.train_loss[-1] < 0.5 * h.train_loss[0]
    assert h.test_accuracy[-1] > 0.85 and h.test_accuracy[-1] > h.test_accuracy[0] + 0.2
    assert h.settle_iterations == [None] + [1] * 15 and h.unsettled == [None] + [0] * 15
    assert h.discord == [None] * 16 and h.stagnation == {} and not h.diverged
    assert fit.state is None and fit.layout is None


def test_symmetric_nudging_averages_plus_and_minus_b(monkeypatch):
    bias = np.random.default_rng(0).standard_normal(NET.parameters().size)
    base = sl.train(NET, X_BLOBS, Y_BLOBS, lr=0.01, **QUICK, **_with(monkeypatch))
    built = use_backprop_oracle(monkeypatch, bias=bias)
    one_sided = sl.train(NET, X_BLOBS, Y_BLOBS, lr=0.01, nudging=0.1, **QUICK)
    symmetric = sl.train(NET, X_BLOBS, Y_BLOBS, lr=0.01, nudging=0.1, symmetric=True, **QUICK)
    assert [b for _, b in built[1].calls[:4]] == [0.1, -0.1, 0.1, -0.1]
    np.testing.assert_allclose(symmetric.network.parameters(), base.network.parameters(), rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(one_sided.network.parameters() - base.network.parameters())) > 1e-3


def _with(monkeypatch):
    use_backprop_oracle(monkeypatch)
    return {}


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "nesterov", "adam", sl.optim.AdamW(lr=0.01)])
def test_an_interrupted_run_resumes_bit_for_bit(monkeypatch, tmp_path, optimizer):
    use_backprop_oracle(monkeypatch)
    kw = dict(QUICK, epochs=5, batch_size=70, optimizer=optimizer, schedule="cosine")
    full = sl.train(NET, X_BLOBS, Y_BLOBS, **kw)
    path = tmp_path / "run.npz"

    def stop(info):
        if info.epoch == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sl.train(NET, X_BLOBS, Y_BLOBS, checkpoint=path, checkpoint_every=2, callback=stop, **kw)
    resumed = sl.train(NET, X_BLOBS, Y_BLOBS, checkpoint=path, checkpoint_every=2, **kw)
    np.testing.assert_array_equal(resumed.network.parameters(), full.network.parameters())
    for key in ("epoch", "step", "train_loss", "settle_iterations", "unsettled", "decided"):
        assert getattr(resumed.history, key) == getattr(full.history, key)
    with pytest.raises(ValueError, match="belongs to another run"):
        sl.train(NET, X_BLOBS, Y_BLOBS, checkpoint=path, **dict(kw, nudging=0.5))
    with pytest.raises(ValueError, match="belongs to another run"):
        sl.train(NET, X_BLOBS, Y_BLOBS, checkpoint=path, steps=100, progress=False)


def test_a_history_saved_before_decided_was_recorded_restores_with_none(monkeypatch):
    use_backprop_oracle(monkeypatch)
    h = sl.train(NET, X_BLOBS, Y_BLOBS, **QUICK).history
    saved = dataclasses.asdict(h)
    del saved["decided"]
    restored = History.restore(saved, History(h.method, h.loss, h.edge_names), h.epoch, h.step, 2, None, None)
    assert restored.decided == [None] * 4 and restored.unsettled == h.unsettled
    with pytest.raises(ValueError, match="exactly the fields"):
        History.restore(dict(saved, decision=[]), History(h.method, h.loss, h.edge_names), h.epoch, h.step, 2,
                        None, None)


def test_callbacks_and_the_spectral_tracker(monkeypatch):
    use_backprop_oracle(monkeypatch)
    infos, tracker = [], sl.SpectralTracker(X_BLOBS[:5], every=10)
    sl.train(NET, X_BLOBS, Y_BLOBS, callback=lambda info: (infos.append(info), tracker(info)), **QUICK)
    assert [(i.method, i.epoch, i.step, i.state) for i in infos] == [("equilibrium", e, 5 * e, None) for e in (1, 2, 3)]
    assert isinstance(infos[0].network, sl.Network) and infos[-1].history.epoch == [0, 1, 2, 3]
    assert [r["step"] for r in tracker.records] == [5, 10]
    infos.clear()
    sl.train(NET, X_BLOBS, Y_BLOBS, callback=infos.append, callback_every=10, **dict(QUICK, epochs=4))
    assert [i.step for i in infos] == [10, 20]


def test_graph_networks_train_through_their_oracle(monkeypatch):
    use_backprop_oracle(monkeypatch)
    net = every_op_network(seed=6)
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(12, 2, 6, 6)), rng.normal(size=(12, 3))
    fit = sl.train(net, X, Y, method="equilibrium", epochs=6, batch_size=4, optimizer="sgd", lr=0.002,
                   seed=0, progress=False)
    assert fit.network.is_graph and len(fit.history.weight_norms[0]) == 4
    assert fit.history.train_loss[-1] < fit.history.train_loss[0]


def test_unsettled_equilibria_are_warned_once_and_counted(monkeypatch):
    use_backprop_oracle(monkeypatch, unsettled=2)
    with pytest.warns(UnsettledWarning, match="2 of the 50 equilibria of mini-batch 1 of epoch 1") as caught:
        fit = sl.train(NET, X_BLOBS, Y_BLOBS, max_pattern_iterations=7, **QUICK)
    assert len([w for w in caught if w.category is UnsettledWarning]) == 1
    assert "max_pattern_iterations=7" in str(caught[0].message)
    assert fit.history.unsettled == [None, 10, 10, 10]
    with pytest.warns(UnsettledWarning, match="4 of the 100 equilibria of mini-batch 1"):
        sl.train(NET, X_BLOBS, Y_BLOBS, symmetric=True, **QUICK)


def test_a_diverging_learning_rate_stops_with_the_epoch_and_finite_weights(monkeypatch):
    use_backprop_oracle(monkeypatch)
    X, Y = sl.tasks.paraboloid(100, seed=0)
    net = sl.Network.random([2, 16, 1], seed=0)
    with pytest.warns(sl.DivergenceWarning, match="diverged during epoch"):
        fit = sl.train(net, X, Y, method="equilibrium", epochs=50, batch_size=100, optimizer="sgd", lr=1e3,
                       progress=False)
    h = fit.history
    assert h.diverged and len(h.epoch) < 51 and np.all(np.isfinite(fit.network.parameters()))
    assert np.all(np.isfinite(h.train_loss))


def _as_graph(net):
    """The chain ``net`` as a graph network of linear and relu nodes (same weights)."""
    nodes, parent = [], "x"
    for l, (W, b) in enumerate(zip(net.weights, net.biases), start=1):
        nodes.append(sl.Node(f"fc{l}", "linear", [parent], params={"weight": W, "bias": b}))
        parent = f"fc{l}"
        if l < len(net.weights):
            nodes.append(sl.Node(f"relu{l}", "relu", [parent]))
            parent = f"relu{l}"
    return sl.Network.from_nodes((net.dims[0],), nodes, output=net.output)


@pytest.mark.parametrize("graph", [False, True])
def test_the_exact_oracle_reports_a_diverging_rate_as_divergence_with_finite_weights(graph):
    # weights of 1e5 and more: the output rows' Gram matrix J J^T (>= I) loses its identity to rounding
    # and its Cholesky factorisation fails; the run stops with the epoch instead of a LinAlgError
    net = _as_graph(NET) if graph else NET
    with pytest.warns(sl.DivergenceWarning, match="diverged during epoch 2"):
        fit = sl.train(net, X_BLOBS, Y_BLOBS, method="equilibrium", epochs=5, batch_size=50, optimizer="sgd",
                       lr=1e6, seed=0, progress=False)
    assert fit.history.diverged and fit.history.epoch == [0, 1]
    theta = GraphParameters(fit.network.graph).flat() if graph else fit.network.parameters()
    assert np.all(np.isfinite(theta)) and np.abs(theta).max() > 1e3


def test_a_diverging_rate_on_a_residual_cnn_is_divergence_not_a_newton_failure():
    # logits of 1e24 and a Gram matrix of 1e36 after one step: Newton cannot converge where J J^T has lost
    # its identity to rounding; the run reports divergence in epoch 1 instead of raising RuntimeError
    net = every_op_network(0, "softmax")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, int(np.prod(net.input_shape))))
    Y = np.eye(net.n_outputs)[rng.integers(0, net.n_outputs, 60)]
    with pytest.warns(sl.DivergenceWarning, match="diverged during epoch 1"):
        fit = sl.train(net, X, Y, method="equilibrium", epochs=3, batch_size=20, optimizer="sgd", lr=1e5, seed=0,
                       progress=False)
    assert fit.history.epoch == [0] and np.all(np.isfinite(GraphParameters(fit.network.graph).flat()))


BAD = [
    (dict(batch_size=0), ValueError, "batch_size must be a positive integer"),
    (dict(batch_size=241), ValueError, r"at most the number of training samples \(240\)"),
    (dict(batch_size=2.5), TypeError, "batch_size must be an integer"),
    (dict(optimizer="adma"), ValueError, "unknown optimizer 'adma'; did you mean 'adam'"),
    (dict(optimizer=sl.optim.Adam(0.1), lr=0.1), ValueError, "give lr to the optimizer instance"),
    (dict(lr=0.0), ValueError, "lr must be a finite number > 0"),
    (dict(lr=-1.0), ValueError, "lr must be a finite number > 0"),
    (dict(lr=math.nan), ValueError, "lr must be a finite number > 0"),
    (dict(lr=math.inf), ValueError, "lr must be a finite number > 0"),
    (dict(nudging=0.0), ValueError, "nudging must be a finite number > 0"),
    (dict(nudging=math.nan), ValueError, "nudging must be a finite number > 0"),
    (dict(schedule="cosin"), ValueError, "unknown schedule 'cosin'; did you mean 'cosine'"),
    (dict(schedule=sl.optim.Cosine(warmup=15)), ValueError, r"warm-up \(15 steps\) must be shorter than the run"),
    (dict(symmetric="yes"), TypeError, "symmetric must be True or False"),
    (dict(max_pattern_iterations=0), ValueError, "max_pattern_iterations"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(loss="huber"), ValueError, "takes the losses mse, cross_entropy"),
    (dict(dt=0.01), ValueError, r"train\(method='equilibrium'\) does not use dt"),
    (dict(steps=100), ValueError, "does not use steps"),
    (dict(alpha=1.0), ValueError, "does not use alpha"),
    (dict(init="forward"), ValueError, "does not use init"),
    (dict(reg={"mu": 0.1}), ValueError, "does not use reg"),
    (dict(threads=1), ValueError, "does not use threads"),
    (dict(method="euler", epochs=3), ValueError, r"train\(method='euler'\) does not use epochs"),
    (dict(method="euler", lr=0.1), ValueError, "does not use lr"),
    (dict(method="euler", optimizer="adam"), ValueError, "does not use optimizer"),
    (dict(method="euler", batch_size=10), ValueError, "does not use batch_size"),
    (dict(method="euler", nudging=0.1), ValueError, "does not use nudging"),
    (dict(method="equilbrium"), ValueError, "unknown method"),
]


@pytest.mark.parametrize("bad, error, match", BAD, ids=[str(b) for b, *_ in BAD])
def test_bad_input_is_refused_before_any_work(monkeypatch, tmp_path, bad, error, match):
    built = use_backprop_oracle(monkeypatch)
    path = tmp_path / "run.npz"
    kw = dict(QUICK, **bad) if bad.get("method", "equilibrium") == "equilibrium" else dict(progress=False, **bad)
    loss = kw.pop("loss", None)
    with pytest.raises(error, match=match):
        sl.train(NET, X_BLOBS, Y_BLOBS, loss=loss, checkpoint=path, **kw)
    assert built == [] and not path.exists()


def test_the_euler_method_is_unchanged_by_default():
    X, Y = sl.tasks.paraboloid(40, seed=0)
    net = sl.Network.random([2, 6, 1], seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = sl.train(net, X, Y, steps=200, epoch_steps=100, seed=0, progress=False)
        explicit = sl.train(net, X, Y, steps=200, epoch_steps=100, seed=0, progress=False, method="euler", alpha=1.0,
                            dt=0.005, warm_start=True, init="random", stagnation="auto")
    np.testing.assert_array_equal(default.network.parameters(), explicit.network.parameters())
    assert default.history.settle_iterations == [None] * 3


def test_the_command_line_trains_at_equilibrium(monkeypatch, tmp_path, capsys):
    use_backprop_oracle(monkeypatch)
    hist, net = tmp_path / "hist.csv", tmp_path / "net.npz"
    assert main(["train", "--method", "equilibrium", "--task", "blobs", "--n-train", "80", "--epochs", "3",
                 "--batch-size", "20", "--optimizer", "adamw", "--lr", "0.01", "--schedule", "cosine",
                 "--nudging", "0.01", "--symmetric", "--no-progress", "--history", str(hist),
                 "--save", str(net)]) == 0
    assert capsys.readouterr().out.startswith("equilibrium: 12 steps")
    rows = list(csv.DictReader(open(hist)))
    assert [r["step"] for r in rows] == ["0", "4", "8", "12"] and rows[-1]["settle_iterations"] == "1"
    data = sl.tasks.make("blobs", 80, 100, seed=0)
    fit = sl.train(sl.Network.random([2, 30, 4], seed=0, output="softmax"), data.X_train, data.Y_train,
                   method="equilibrium", epochs=3, batch_size=20, optimizer="adamw", lr=0.01, schedule="cosine",
                   nudging=0.01, symmetric=True, seed=0, progress=False)
    np.testing.assert_array_equal(sl.Network.load(net).parameters(), fit.network.parameters())


def test_the_issues_call_on_the_exact_equilibria_learns_and_resumes_bit_for_bit(tmp_path):
    X, Y = sl.tasks.blobs(400, seed=3)
    y = np.argmax(Y, axis=1)
    kw = dict(method="equilibrium", epochs=6, batch_size=100, optimizer="adam", lr=1e-2, seed=0, progress=False)
    fit = sl.train(NET, X[:300], y[:300], X[300:], y[300:], **kw)
    h = fit.history
    assert h.test_accuracy[-1] > 0.8 and h.train_loss[-1] < 0.6 * h.train_loss[0]
    assert all(i >= 1 for i in h.settle_iterations[1:]) and all(u >= 0 for u in h.unsettled[1:])
    path = tmp_path / "run.npz"

    def stop(info):
        if info.epoch == 4:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sl.train(NET, X[:300], y[:300], X[300:], y[300:], checkpoint=path, checkpoint_every=3, callback=stop, **kw)
    resumed = sl.train(NET, X[:300], y[:300], X[300:], y[300:], checkpoint=path, **kw)
    np.testing.assert_array_equal(resumed.network.parameters(), fit.network.parameters())
    assert resumed.history.sliding == h.sliding and resumed.history.test_loss == h.test_loss


class NoNegativeEquilibrium(BackpropOracle):
    """Refuses negative nudging from the fourth mini-batch on, as the exact oracle does when I + b H M is
    not positive definite."""

    def gradient(self, theta, X, Y, nudging, out):
        if nudging < 0 and len(self.calls) >= 6:
            raise NudgingTooNegative("nudging -0.5 is too negative: ...")
        return super().gradient(theta, X, Y, nudging, out)


def test_a_negative_nudging_without_equilibrium_is_an_error_naming_where(monkeypatch):
    monkeypatch.setattr(run_module, "make_oracle", lambda prob, cfg: NoNegativeEquilibrium(prob.net, prob.loss))
    with pytest.raises(NudgingTooNegative, match="symmetric nudging after 3 optimiser steps: nudging -0.5"):
        sl.train(NET, X_BLOBS, Y_BLOBS, nudging=0.5, symmetric=True, **QUICK)
