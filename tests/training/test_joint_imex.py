"""IMEX training (method="imex"): the ROS2 step against a naive dense step, its error estimate, convergence
to fine Euler, ReLU boundaries, bad options and resumes."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

from helpers import naive
from helpers.naive_training import LOSS_PARAM, naive_step
from helpers.strategies import step_cases
import sheaflinalg as sl
from sheaflinalg.network.errors import GraphNetworkError
from sheaflinalg.training.imex.ros2 import GAMMA
from sheaflinalg.training.imex.run import ImexChainRun, ImexSettings
from sheaflinalg.training.problem import Problem

ALPHA, BETA = 0.7, 0.3


def imex_run(net, X, Y, state, loss, tol=1e-3):
    """An IMEX run started at ``state`` ((M, n_move) rows), before any step."""
    prob = Problem(net, X, Y, None, None, loss, LOSS_PARAM[loss] if loss in ("pnorm", "huber") else None)
    cfg = ImexSettings.check(prob, callback=None, alpha=ALPHA, beta=BETA, dt=0.1, steps=10, init=state,
                             warm_start=True, epoch_steps=10, reg=None, record_every=1, seed=0, callback_every=None,
                             stagnation=False, blas_threads=1, checkpoint_every=1, threads=1)
    return ImexChainRun(prob, dataclasses.replace(cfg, tol=tol))


def library_step(run, h):
    r = run.ros2
    r._factor(run.S, run.theta, h)
    f0 = r._f(run.S, run.theta, start=True)
    return r.attempt(run.S, run.theta, f0, h)


def hidden_rows(net):
    """Columns of the hidden ``z`` and ``a`` blocks in a ``(M, n_move)`` state."""
    z, a, o = [], [], 0
    for n in net.dims[1:-1]:
        z += range(o, o + n)
        a += range(o + n, o + 2 * n)
        o += 2 * n
    return np.array(z, dtype=int), np.array(a, dtype=int)


def naive_field(net, X, Y, state, loss):
    """``(alpha F, beta V)`` of the joint dynamics from the naive dense Euler step of test_training, with
    Filippov's force on a hidden ``z = 0``: ``F+`` (active side) if it points up, ``F- = F+ - alpha a`` if
    that points down, else 0."""
    p = LOSS_PARAM[loss]
    net1, s1 = naive_step(net, X, Y, state, loss, p, ALPHA, BETA, 1.0)
    F = s1 - state
    z, a = hidden_rows(net)
    for s, j in zip(*np.nonzero(state[:, z] == 0)):
        up = F[s, z[j]]
        down = up - ALPHA * state[s, a[j]]
        F[s, z[j]] = up if up > 0 else (down if down < 0 else 0.0)
    return F, net1.parameters() - net.parameters()


def naive_operator(net, X, state, c, out_curv):
    """Per-sample dense ``I + c L_P`` (``L_P = D^T D`` of the interior edges, pattern of ``state``)."""
    k, n_out = net.n_hidden, net.dims[-1]
    mats = []
    for s in range(X.shape[0]):
        zs, o = [], 0
        for l in range(1, k + 1):
            zs.append(state[s, o:o + net.dims[l]] >= 0)
            o += 2 * net.dims[l]
        sh = naive.sheaf(net.weights, net.biases, "identity", X[s], zs, reduced=True)
        D = sh["delta"][:, sh["free"]]
        L = D.T @ D
        L[-n_out:, -n_out:] += out_curv * np.eye(n_out)
        W = np.eye(L.shape[0]) + c * L
        on = hidden_rows(net)[0][state[s, hidden_rows(net)[0]] == 0]    # on a switching surface: explicit
        W[on, :] = 0.0
        W[:, on] = 0.0
        W[on, on] = 1.0
        mats.append(W)
    return mats


def naive_ros2(net, X, Y, state, loss, h):
    """One ROS2 step, every solve dense: ``W k1 = f(y)``, ``W k2 = f(y + h k1) - 2 k1``."""
    out_curv = 1.0 if net.output == "identity" and loss == "mse" else 0.0
    Ws = naive_operator(net, X, state, GAMMA * h * ALPHA, out_curv)

    def solve(R):
        return np.stack([np.linalg.solve(W, r) for W, r in zip(Ws, R)])

    fS, fT = naive_field(net, X, Y, state, loss)
    k1S, k1T = solve(fS), fT
    net2 = sl.Network.from_parameters(net.parameters() + h * k1T, net.dims, net.output)
    f2S, f2T = naive_field(net2, X, Y, state + h * k1S, loss)
    k2S, k2T = solve(f2S - 2 * k1S), f2T - 2 * k1T
    return state + 1.5 * h * k1S + 0.5 * h * k2S, net.parameters() + 1.5 * h * k1T + 0.5 * h * k2T


@given(step_cases())
@settings(max_examples=30, deadline=None)
def test_one_implicit_step_matches_a_naive_dense_step(case):
    net, X, Y, state, loss, reg, rng = case
    h = 0.3
    S_new, theta_new, err, _ = library_step(imex_run(net, X, Y, state, loss), h)
    S_ref, theta_ref = naive_ros2(net, X, Y, state, loss, h)
    n_move = state.shape[1]
    np.testing.assert_allclose(S_new[:n_move].T, S_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(theta_new, theta_ref, rtol=1e-9, atol=1e-9)
    assert np.isfinite(err)


def test_error_estimate_is_second_order_away_from_the_switching_surfaces():
    net = sl.Network.random([2, 5, 4, 1], seed=3)
    X, Y = sl.tasks.paraboloid(6, seed=1)
    state = sl.harmonic_extension(net, X).free[:, :-1] + 0.3     # off the equilibrium, pattern kept
    ests = []
    for h in (0.02, 0.01, 0.005):
        run = imex_run(net, X, Y, state, "mse")
        S_new, _, err, _ = library_step(run, h)
        z = run.ros2.z_rows
        assert np.array_equal(S_new[z] >= 0, run.S[z] >= 0)
        ests.append(err)
    slopes = np.log2(np.array(ests[:-1]) / np.array(ests[1:]))
    assert np.all((slopes > 1.8) & (slopes < 2.2)), slopes


def test_converges_to_fine_euler_as_tol_goes_to_zero():
    X, Y = sl.tasks.paraboloid(40, seed=0)
    net = sl.Network.random([2, 6, 1], seed=1)
    kw = dict(init="forward", progress=False, beta=0.05, stagnation=False)
    ref = sl.train(net, X, Y, dt=2e-4, steps=10_000, epoch_steps=10_000, **kw).network.parameters()
    move = np.linalg.norm(ref - net.parameters())
    errors = []
    for tol in (1e-2, 1e-4, 1e-6):
        fit = sl.train(net, X, Y, dt=0.05, steps=40, epoch_steps=40, method="imex", tol=tol, **kw)
        errors.append(np.linalg.norm(fit.network.parameters() - ref) / move)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 2e-3, errors


def test_steps_never_cross_a_relu_boundary_unseen(monkeypatch):
    """Every accepted step: a pre-activation that ends on a side the stage did not see either slides
    (both one-sided forces point at the surface) or its force jump stays within the tolerance."""
    from sheaflinalg.training.imex import ros2
    seen = []
    original = ros2.Ros2.attempt

    def spy(self, S, theta, f0, h):
        out = original(self, S, theta, f0, h)
        S2 = S.copy()
        S2[:self.field.n_move] += h * self.op.solve(f0[0])
        seen.append((S.copy(), S2, out[0], h, out[3], self.e0.copy(), out[2]))
        return out

    monkeypatch.setattr(ros2.Ros2, "attempt", spy)
    X, Y = sl.tasks.paraboloid(30, seed=2)
    net = sl.Network.random([2, 8, 1], seed=4)
    fit = sl.train(net, X, Y, dt=0.05, steps=100, epoch_steps=50, init="random", seed=1, progress=False,
                   method="imex", tol=1e-4)
    assert fit.integration["boundary_cuts"] > 0                     # the rule was exercised
    accepted = [c for c in seen if c[4] is None and c[6] <= 1.0]
    z, a = slice(0, 8), slice(8, 16)
    for S, S2, S1, h, _, e0, _ in accepted:
        unseen = (S1[z] >= 0) != (S2[z] >= 0)
        sliding = (S[a] - S[z] - e0 <= 0) & (e0 <= 0)
        bad = unseen & ~sliding
        jump = np.maximum(np.abs(S[a]), np.abs(S1[a]))
        crossed = bad & ((S1[z] >= 0) != (S[z] >= 0))
        before = S[z][crossed] / (S[z][crossed] - S1[z][crossed])
        assert np.all(h * jump[crossed] * (1 - before) <= 1e-4 * (1 + np.abs(S1[z][crossed])) * (1 + 1e-12))
    assert fit.integration["steps"] == len(accepted)


def test_bad_options_are_refused_before_work():
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 4, 1], seed=0)
    for bad in (0.0, -1e-3, np.nan, np.inf):
        with pytest.raises(ValueError, match="tol must be a finite number > 0"):
            sl.train(net, X, Y, method="imex", tol=bad, progress=False)
    with pytest.raises(ValueError, match="does not use tol"):
        sl.train(net, X, Y, tol=1e-3, progress=False)
    with pytest.raises(ValueError, match="method"):
        sl.train(net, X, Y, method="imexx", progress=False)
    with pytest.raises(TypeError):
        sl.train(net, X, Y, method="imex", atol=1e-3, progress=False)
    with pytest.raises(ValueError, match="does not use reg"):
        sl.train(net, X, Y, method="imex", reg={"lam": 1e-3}, progress=False)
    with pytest.raises(ValueError, match="does not use threads"):
        sl.train(net, X, Y, method="imex", threads=2, progress=False)
    with pytest.raises(ValueError, match="does not use tol"):
        sl.train(net, X, Y, method="equilibrium", tol=1e-3, progress=False)
    pytest.importorskip("torch")
    from helpers.torch_models import mnist1d_cnn
    cnn = sl.Network.from_torch(mnist1d_cnn(), input_shape=(1, 40))
    with pytest.raises(GraphNetworkError, match="method='imex'"):
        sl.train(cnn, np.zeros((3, 40)), np.zeros((3, cnn.n_outputs)), method="imex", progress=False)


class Interrupt(Exception):
    pass


def test_interrupted_run_resumes_bit_for_bit(tmp_path):
    X, Y = sl.tasks.paraboloid(30, seed=1)
    net = sl.Network.random([2, 6, 1], seed=2)
    kw = dict(steps=400, epoch_steps=50, dt=0.02, seed=3, progress=False, init="random", method="imex", tol=1e-3)
    full = sl.train(net, X, Y, **kw)

    def stop(info):
        if info.epoch == 5:
            raise Interrupt

    path = tmp_path / "run.npz"
    with pytest.raises(Interrupt):
        sl.train(net, X, Y, checkpoint=path, checkpoint_every=2, callback=stop, **kw)
    resumed = sl.train(net, X, Y, checkpoint=path, checkpoint_every=2, **kw)
    np.testing.assert_array_equal(resumed.network.parameters(), full.network.parameters())
    np.testing.assert_array_equal(resumed.state, full.state)
    assert resumed.history.train_loss == full.history.train_loss
    assert resumed.integration == full.integration
    euler = {k: v for k, v in kw.items() if k not in ("method", "tol")}
    with pytest.raises(ValueError, match="another run"):            # an Euler run's checkpoint is another run
        sl.train(net, X, Y, checkpoint=path, **euler)
