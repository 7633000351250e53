"""Joint dynamics against a naive dense implementation written from the paper (section 5.2, appendix C)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.kernel_steps import kernel_step, tiled_kernel_step
from helpers import naive
from helpers.naive_training import LOSS_PARAM, naive_step, split, targets
from helpers.strategies import step_cases
import sheaflinalg as sl
from sheaflinalg.kernels.training import tiled_steps, tiled_steps_parallel
from sheaflinalg.training.parameter_sheaf import parameter_sheaf
from sheaflinalg.training.euler import stagnation
from sheaflinalg.training.euler.stagnation import effective_spectral_gap


@given(step_cases())
@settings(max_examples=40)
def test_one_step_matches_naive_dense_dynamics(case):
    net, X, Y, state, loss, reg, rng = case
    p = LOSS_PARAM[loss]
    state0 = rng.normal(size=state.shape)
    theta0 = rng.normal(size=net.n_parameters)
    args = (net, X, Y, state, loss, p, 0.7, 0.3, 0.01, reg, state0, theta0)
    net_k, s_k = kernel_step(*args)
    net_n, s_n = naive_step(*args)
    np.testing.assert_allclose(s_k, s_n, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(net_k.parameters(), net_n.parameters(), rtol=1e-12, atol=1e-12)


@given(step_cases(), st.data())
@settings(max_examples=30, deadline=None)
def test_tiled_steps_match_naive_dense_dynamics(case, data):
    """Any cut of the batch into tiles (ragged, sub-tiled): the same step as the naive dense dynamics,
    and the serial and parallel kernels equal bit for bit."""
    import numba

    net, X, Y, state, loss, reg, rng = case
    M = X.shape[0]
    cuts = sorted(set(data.draw(st.lists(st.integers(1, M - 1), max_size=4)))) if M > 1 else []
    bounds = [0] + cuts + [M]
    widths = [data.draw(st.integers(1, 3)) for _ in cuts + [M]]
    p = LOSS_PARAM[loss]
    state0, theta0 = rng.normal(size=state.shape), rng.normal(size=net.n_parameters)
    args = (net, X, Y, state, loss, p, 0.7, 0.3, 0.01, reg, state0, theta0)
    theta_k, s_k = tiled_kernel_step(*args, bounds, widths, tiled_steps)
    net_n, s_n = naive_step(*args)
    np.testing.assert_allclose(s_k, s_n, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(theta_k, net_n.parameters(), rtol=1e-12, atol=1e-12)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    theta_p, s_p = tiled_kernel_step(*args, bounds, widths, tiled_steps_parallel, n_steps=3)
    theta_s, s_s = tiled_kernel_step(*args, bounds, widths, tiled_steps, n_steps=3)
    np.testing.assert_array_equal(theta_p, theta_s)
    np.testing.assert_array_equal(s_p, s_s)


def test_one_tile_is_the_whole_batch_kernel():
    """train_steps (the batch as one tile) is tiled_steps with the bounds [0, M], bit for bit."""
    rng = np.random.default_rng(5)
    net = sl.Network.random([3, 7, 5, 2], seed=2)
    X, Y = rng.uniform(-2, 2, size=(40, 3)), rng.normal(size=(40, 2))
    n_move = sl.Layout(net.dims).kernel_offsets().yhat_off
    state = rng.normal(size=(40, n_move))
    args = (net, X, Y, state, "huber", 0.3, 0.7, 0.3, 0.01)
    net_k, s_k = kernel_step(*args, n_steps=4, tile=16)
    theta_t, s_t = tiled_kernel_step(*args, None, state * 0, net.parameters() * 0, [0, 40], [16], tiled_steps,
                                     n_steps=4)
    np.testing.assert_array_equal(net_k.parameters(), theta_t)
    np.testing.assert_array_equal(s_k, s_t)


def reference_run(net, X, Y, state, steps, epoch_steps, warm_start, alpha, beta, dt):
    """Naive driver: dense steps, restarting from the forward pass when not warm-starting."""
    k_move = state.shape[1]
    for step in range(steps):
        if step and step % epoch_steps == 0 and not warm_start:
            state = sl.harmonic_extension(net, X).free[:, :k_move].copy()
        net, state = naive_step(net, X, Y, state, "cross_entropy" if net.output != "identity" else "mse",
                                0.0, alpha, beta, dt)
    return net, state


@pytest.mark.parametrize("output,warm", [("identity", True), ("sigmoid", False), ("softmax", False)])
def test_train_driver_matches_naive_loop(output, warm):
    rng = np.random.default_rng(3)
    net = sl.Network.random([2, 4, 3, 2 if output == "softmax" else 1], seed=1, output=output)
    X = rng.uniform(-2, 2, size=(6, 2))
    Y, _ = targets(net, 6, rng)
    n_move = sl.Layout(net.dims).kernel_offsets().yhat_off
    init = rng.normal(size=(6, n_move))
    fit = sl.train(net, X, Y, steps=25, epoch_steps=10, init=init, warm_start=warm, dt=0.02, beta=0.5,
                   progress=False)
    net_n, state_n = reference_run(net, X, Y, init, 25, 10, warm, 1.0, 0.5, 0.02)
    np.testing.assert_allclose(fit.network.parameters(), net_n.parameters(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(fit.state[:, :n_move], state_n, rtol=1e-11, atol=1e-12)
    np.testing.assert_array_equal(fit.state[:, n_move:], Y)
    assert fit.history.epoch == [0, 1, 2, 3] and fit.history.step == [0, 10, 20, 25]


def naive_discord(net, X, Y, state, output_ce):
    """Per-edge discord 1/2 |delta omega|^2 summed over samples (output edge: 1/2 |phi(z) - y|^2)."""
    k = net.n_hidden
    zs, _, n_move = split(net, state)
    total = 0.0
    for s in range(X.shape[0]):
        masks = [zs[l][s] >= 0 for l in range(k)]
        sh = naive.sheaf(net.weights, net.biases, "identity", X[s], masks, reduced=True)
        full = np.zeros(sh["delta"].shape[1])
        full[sh["fixed"]] = sh["u"]
        full[sh["free"]] = state[s, :n_move]
        e = sh["delta"] @ full
        d = naive.phi(net.output, zs[k][s]) - Y[s]
        total += 0.5 * e @ e + 0.5 * d @ d
    return total


def test_history_records_forward_losses_discord_and_norms():
    rng = np.random.default_rng(0)
    X, Y = sl.tasks.circular(40, seed=2)
    Xt, Yt = sl.tasks.circular(20, seed=3)
    net = sl.Network.random([2, 6, 1], seed=0, output="sigmoid")
    fit = sl.train(net, X, Y, Xt, Yt, steps=300, epoch_steps=100, init="forward", warm_start=False,
                   progress=False)
    h = fit.history
    assert len(h) == 4 and h.method == "sheaf" and h.loss == "cross_entropy"
    P = fit.network.forward(X)
    expected = -np.mean(Y * np.log(P) + (1 - Y) * np.log(1 - P))
    assert h.train_loss[-1] == pytest.approx(expected, rel=1e-12)
    Pt = fit.network.forward(Xt)
    assert h.test_accuracy[-1] == pytest.approx(np.mean((Pt >= 0.5) == (Yt >= 0.5)))
    assert h.discord[-1] == pytest.approx(naive_discord(fit.network, X, Y, fit.state, True), rel=1e-10)
    assert np.isclose(sum(h.discord_by_edge[-1]), h.discord[-1])
    assert h.edge_names == ["e_z1", "e_a1", "e_z2", "e_y"]
    W = fit.network.weights
    assert h.weight_norms[-1][1] == pytest.approx(np.sqrt(np.sum(W[1] ** 2) + np.sum(fit.network.biases[1] ** 2)))
    assert h.weight_displacement[-1] == pytest.approx(np.linalg.norm(fit.network.parameters() - net.parameters()))
    assert np.all(np.diff(h["wall_time"]) >= 0) and h["train_loss"].shape == (4,)
    assert rng is not None


def test_callback_hook_api():
    X, Y = sl.tasks.paraboloid(30, seed=0)
    net = sl.Network.random([2, 5, 1], seed=0)
    seen = []

    def cb(info):
        seen.append((info.method, info.epoch, info.step, info.state.shape, len(info.history)))
        assert isinstance(info.network, sl.Network) and info.X.shape == (30, 2)
        with pytest.raises(ValueError, match="read-only"):
            info.network.weights[0][:] = 1e6   # networks are immutable: training cannot be disturbed
    fit = sl.train(net, X, Y, steps=500, epoch_steps=50, callback=cb, callback_every=200, progress=False)
    n_free = sl.Layout(net.dims).n_free
    assert seen == [("sheaf", 4, 200, (30, n_free), 5), ("sheaf", 8, 400, (30, n_free), 9)]
    assert np.all(np.abs(fit.network.weights[0]) < 100)
    default = []
    sl.train(net, X, Y, steps=150, epoch_steps=50, callback=lambda i: default.append(i.step), progress=False)
    assert default == [50, 100, 150]


def test_parameter_sheaf_laplacian_action_is_the_kernel_weight_update():
    rng = np.random.default_rng(5)
    net = sl.Network.random([3, 4, 5, 2], seed=2)
    X = rng.normal(size=(7, 3))
    Y = rng.normal(size=(7, 2))
    n_move = sl.Layout(net.dims).kernel_offsets().yhat_off
    state = rng.normal(size=(7, n_move))
    h = parameter_sheaf(net, X, state)
    beta, dt = 0.4, 0.01
    net1, _ = kernel_step(net, X, Y, state, "mse", 0.0, 1.0, beta, dt)
    # eq. structure-diffusion: d(theta)/dt = -beta Pi_W(L_H rho).
    velocity = (net1.parameters() - net.parameters()) / dt
    np.testing.assert_allclose(velocity, -beta * h.projected_action(), rtol=1e-10, atol=1e-12)
    # delta^H rho at the current maps is the weight-edge part of delta omega_bar.
    zs, acts, _ = split(net, state)
    e1 = zs[0] - X @ net.weights[0].T - net.biases[0]
    np.testing.assert_allclose((h.coboundary @ h.rho)[:7 * 4].reshape(7, 4), e1, atol=1e-12)
    L = h.coboundary.T @ h.coboundary
    assert abs(L - h.laplacian).max() < 1e-12


def test_stagnation_ingredients_match_dense_definitions(monkeypatch):
    rng = np.random.default_rng(1)
    X, Y = sl.tasks.paraboloid(12, seed=1)
    net = sl.Network.random([2, 4, 1], seed=3)
    n_move = sl.Layout(net.dims).kernel_offsets().yhat_off
    init = rng.normal(size=(12, n_move))
    fit = sl.train(net, X, Y, steps=200, epoch_steps=100, init=init, progress=False)
    st_ = fit.history.stagnation
    zs, _, _ = split(net, init)
    disagreement, lam_min = 0.0, np.inf
    for s in range(12):
        masks = [zs[0][s] >= 0]
        sh = naive.sheaf(net.weights, net.biases, "identity", X[s], masks, reduced=False)
        delta = sh["delta"]
        full = np.zeros(delta.shape[1])
        full[sh["fixed"]] = sh["u"]
        full[sh["free"]] = np.concatenate([init[s], Y[s]])
        e = delta @ full
        disagreement += e @ e
        free = np.flatnonzero(sh["free"])[:-1]           # yhat is pinned during training
        lam_min = min(lam_min, np.linalg.eigvalsh(delta[:, free].T @ delta[:, free])[0])
    assert st_["initial_disagreement"] == pytest.approx(np.sqrt(disagreement), rel=1e-12)
    assert st_["lambda_eff"] == pytest.approx(lam_min, rel=1e-9)
    assert st_["bound"] == pytest.approx(st_["beta"] * st_["B_omega"] * st_["initial_disagreement"]
                                         / (st_["alpha"] * st_["lambda_eff"]))
    assert st_["B_omega"] >= max(fit.history.state_norm)
    assert st_["max_displacement"] == max(fit.history.weight_displacement)
    assert st_["holds"] == (st_["max_displacement"] <= st_["bound"])
    rows, layout = np.concatenate([init, Y], axis=1), sl.Layout(net.dims)
    monkeypatch.setattr(stagnation, "DENSE_GAP_MAX", 5 * layout.n_free * n_move)   # chunks of 5
    assert effective_spectral_gap(net, X, rows, layout) == pytest.approx(lam_min, rel=1e-12)
    monkeypatch.setattr(stagnation, "DENSE_GAP_MAX", 0)
    sparse_gap = effective_spectral_gap(net, np.repeat(X, 40, axis=0), np.repeat(rows, 40, axis=0), layout)
    assert sparse_gap == pytest.approx(lam_min, rel=1e-8)


def test_losses_train_and_report_consistently():
    X, Y = sl.tasks.saddle(40, seed=0)
    net = sl.Network.random([2, 8, 1], seed=0)
    for loss in ("mse", "l1", "pnorm", "huber"):
        fit = sl.train(net, X, Y, steps=400, epoch_steps=100, loss=loss, progress=False, seed=0)
        assert fit.history.loss == loss and np.isfinite(fit.history.train_loss).all()
    with pytest.raises(ValueError, match="p > 1"):
        sl.train(net, X, Y, steps=10, loss="pnorm", loss_param=1.0, progress=False)


def test_random_init_is_seeded_and_restart_draws_fresh_stalks():
    X, Y = sl.tasks.paraboloid(10, seed=0)
    net = sl.Network.random([2, 3, 1], seed=0)
    a = sl.train(net, X, Y, steps=40, epoch_steps=20, seed=7, progress=False)
    b = sl.train(net, X, Y, steps=40, epoch_steps=20, seed=7, progress=False)
    c = sl.train(net, X, Y, steps=40, epoch_steps=20, seed=8, progress=False)
    np.testing.assert_array_equal(a.network.parameters(), b.network.parameters())
    assert not np.array_equal(a.network.parameters(), c.network.parameters())


# ------------------------------------------------------------------------------------ bad input

def test_bad_input_is_refused_before_work():
    X, Y = sl.tasks.paraboloid(10, seed=0)
    net = sl.Network.random([2, 3, 1], seed=0)
    soft = sl.Network.random([2, 3, 3], seed=0, output="softmax")
    cases = [
        (dict(X=X, Y=Y[:5]), "shape"),
        (dict(X=X[:, :1], Y=Y), "features"),
        (dict(X=np.where(np.arange(20).reshape(10, 2) == 7, np.nan, X), Y=Y), "NaN"),
        (dict(X=X, Y=np.where(np.arange(10)[:, None] == 2, np.inf, Y)), "NaN"),
        (dict(X=X, Y=Y, beta=0.0), "beta"),
        (dict(X=X, Y=Y, dt=-1.0), "dt"),
        (dict(X=X, Y=Y, alpha=np.inf), "alpha"),
        (dict(X=X, Y=Y, steps=0), "steps"),
        (dict(X=X, Y=Y, init="warm"), "init"),
        (dict(X=X, Y=Y, init=np.zeros((10, 3))), "shape"),
        (dict(X=X, Y=Y, reg={"lam": -1.0}), "lam"),
        (dict(X=X, Y=Y, reg={"gamma": 1.0}), "gamma"),
        (dict(X=X, Y=Y, loss="hinge"), "hinge"),
        (dict(X=X, Y=Y, loss="cross_entropy"), "sigmoid or softmax"),
        (dict(X=X, Y=Y, dt=5.0), "unstable step size"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            sl.train(net, progress=False, **kwargs)
    with pytest.raises(ValueError, match="one-hot"):
        sl.train(soft, X, np.full((10, 3), 1 / 3), progress=False)
    with pytest.raises(ValueError, match="integer class labels"):
        sl.train(soft, X, np.full(10, 0.5), progress=False)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sl.train(sl.Network.random([2, 3, 1], output="sigmoid"), X, Y + 3, progress=False)
    with pytest.raises(TypeError, match="Network"):
        sl.train("net", X, Y, progress=False)
    with pytest.raises(TypeError, match="callable"):
        sl.train(net, X, Y, callback=3, progress=False)


def test_integer_labels_become_one_hot():
    X, Y = sl.tasks.blobs(40, seed=0)
    net = sl.Network.random([2, 5, 4], seed=0, output="softmax")
    a = sl.train(net, X, Y, steps=50, epoch_steps=50, init="forward", progress=False)
    b = sl.train(net, X, Y.argmax(axis=1), steps=50, epoch_steps=50, init="forward", progress=False)
    np.testing.assert_array_equal(a.network.parameters(), b.network.parameters())


def test_divergence_stops_with_epoch_and_last_finite_loss():
    X, Y = sl.tasks.paraboloid(50, seed=0)
    net = sl.Network.random([2, 8, 1], seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = sl.train(net, X, Y * 100, steps=20_000, epoch_steps=100, beta=50.0, dt=0.01, progress=False)
    h = fit.history
    assert h.diverged
    msg = [str(w.message) for w in caught if issubclass(w.category, sl.DivergenceWarning)]
    assert len(msg) == 1 and "epoch" in msg[0] and repr(h.last_finite_loss()) in msg[0]
    assert np.all(np.isfinite(fit.network.parameters()))
    assert np.isfinite(h.train_loss).all() and h.epoch[-1] < 200
    expected = np.mean((fit.network.forward(X) - Y * 100) ** 2)
    assert h.train_loss[-1] == pytest.approx(expected, rel=1e-10)
