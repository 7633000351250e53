"""The nudged loss edge's Newton solve on near-certain predictions (training/equilibrium/loss_edge.py)."""

from decimal import Decimal, localcontext

import numpy as np
import pytest

from helpers.paths import DATA
from sheaflinalg.training.equilibrium.loss_edge import potential, solve_coefficients


def _naive_cross_entropy(z, y):
    """Softmax cross-entropy ``log sum exp z - y . z`` from the definition in 50-digit decimals (the oracle)."""
    with localcontext() as ctx:
        ctx.prec = 50
        zd = [Decimal(float(v)) for v in z]
        lse = sum(v.exp() for v in zd).ln()
        return float(lse - sum(Decimal(float(a)) * v for a, v in zip(y, zd)))


@pytest.mark.parametrize("margin", [5.0, 12.0, 18.0, 30.0])
def test_the_softmax_potential_keeps_its_digits_when_the_prediction_is_near_certain(margin):
    z = np.array([[0.3, margin, -2.0, 1.0]])
    y = np.array([[0.0, 1.0, 0.0, 0.0]])
    np.testing.assert_allclose(potential("softmax", "cross_entropy", z, y)[0], _naive_cross_entropy(z[0], y[0]),
                               rtol=1e-12)


@pytest.mark.parametrize("b", [1e-6, 1e-3, 1.0])
def test_near_certain_samples_settle_at_the_minimiser(b):
    # a trained network's confident sample: a small quadratic term and a gradient of 1e-6 or less
    rng = np.random.default_rng(0)
    n, S = 10, 20
    A = rng.standard_normal((S, n, 3 * n))
    G = A @ A.transpose(0, 2, 1) * 10.0 + np.eye(n)          # P = G^-1 has eigenvalues near 0.03 and below
    F = rng.standard_normal((S, n))
    labels = rng.integers(0, n, S)
    F[np.arange(S), labels] += np.linspace(8.0, 60.0, S)     # from confident to certain within rounding
    Y = np.eye(n)[labels]
    V, W, newton = solve_coefficients(G.copy(), np.zeros((S, 0)), F, Y, b, "softmax", "cross_entropy")
    P = np.linalg.inv(G)
    for s in range(S):
        z = F[s] + W[s]
        p = np.exp(z - z.max())
        p /= p.sum()
        gradient = P[s] @ W[s] + b * (p - Y[s])
        assert np.abs(gradient).max() <= 1e-12 * b * max(1.0, np.abs(p - Y[s]).max()) + 1e-300
    np.testing.assert_allclose(np.einsum("sij,sj->si", G, V), W, rtol=1e-10, atol=1e-300)
    assert newton < 100


def test_a_trained_cnns_certain_sample_settles():
    # recorded from the MNIST-1D CNN after 13 epochs at equilibrium: logit margin 26, P's eigenvalues
    # 6e-4..1e-2, so the output's displacement (3e-15) is below the rounding of its value (36)
    d = np.load(DATA / "near_certain_sample.npz", allow_pickle=False)
    V, W, newton = solve_coefficients(d["G"].copy(), np.zeros((1, 0)), d["F"], d["Y"], float(d["b"]),
                                      "softmax", "cross_entropy")
    z = d["F"][0] + W[0]
    p = np.exp(z - z.max())
    p /= p.sum()
    gradient = np.linalg.inv(d["G"][0]) @ W[0] + float(d["b"]) * (p - d["Y"][0])
    assert newton < 100 and np.abs(gradient).max() <= 1e-3 * float(d["b"]) * np.abs(p - d["Y"][0]).max()


def test_a_confident_sample_at_nudging_1_settles():
    # recorded from the MNIST-1D MLP in its third epoch at nudging 1: logit margin 13, G's eigenvalues
    # 28..1033; after one Newton step the decrement (|slope| ~ 1e-14 psi) is under psi's rounding, and the
    # line search halved the next step 100 times
    d = np.load(DATA / "confident_sample_nudging_1.npz", allow_pickle=False)
    b = float(d["b"])
    V, W, newton = solve_coefficients(d["G"].copy(), np.zeros((1, 0)), d["F"], d["Y"], b, "softmax",
                                      "cross_entropy")
    z = d["F"][0] + W[0]
    p = np.exp(z - z.max())
    p /= p.sum()
    gradient = np.linalg.inv(d["G"][0]) @ W[0] + b * (p - d["Y"][0])
    assert newton < 100 and np.abs(gradient).max() <= 1e-14 * b      # the rounding of p - y: 1e-16


def _linear_fixed_point(b, order, scale=1.0):
    """``(u, exact, calls)``: the fixed point of the identity output's squared error, ``u = -b (F + M u - Y)``, whose
    exact solution is the linear system ``(I + b M) u = -b (F - Y)``; ``M = J J^T`` of norm about ``30 scale^2``,
    so the iteration contracts by about ``30 scale^2 b`` per step."""
    from sheaflinalg.training.equilibrium.loss_edge import fixed_point
    rng = np.random.default_rng(1)
    S, n = 6, 4
    J = scale * rng.standard_normal((S, n, 15))
    M = J @ J.transpose(0, 2, 1)
    F, Y = rng.standard_normal((S, n)), rng.standard_normal((S, n))
    calls = []

    def respond(u):
        calls.append(u.copy())
        return u.copy(), np.einsum("sij,sj->si", M, u)

    u = fixed_point(respond, F, Y, b, "identity", "mse", order)
    return u, np.linalg.solve(np.eye(n) + b * M, -b * (F - Y)[..., None])[..., 0], calls


@pytest.mark.parametrize("b, order", [(1e-6, 1), (1e-6, 2), (1e-4, 1), (1e-4, 2), (-1e-4, 2)])
def test_the_fixed_point_solves_its_equation_to_the_declared_tolerance(b, order):
    from sheaflinalg.training.equilibrium.loss_edge import fixed_point_tolerance
    u, exact, _ = _linear_fixed_point(b, order)
    tol = max(fixed_point_tolerance(b, order), 1e-13)               # or to rounding, when that comes first
    assert np.all(np.abs(u - exact).max(axis=1) <= tol * np.abs(exact).max(axis=1))


@pytest.mark.parametrize("b", [0.3, 3.0])
def test_the_fixed_point_gives_up_after_two_steps(b):
    u, _, calls = _linear_fixed_point(b, 1)     # contraction 30 b >= 9: the second step shows it cannot converge
    assert u is None and len(calls) == 2


def test_the_fixed_point_skips_the_confirming_step_only_within_the_bias():
    # contraction about 3e-7 at b = 1e-6: the second step moves u by about 1e-13 relative, below one-sided
    # nudging's tolerance (1e-8) but not symmetric nudging's (1e-14), which takes the step to rounding
    from sheaflinalg.training.equilibrium.loss_edge import fixed_point_tolerance
    for order, steps in ((1, 2), (2, 3)):
        u, exact, calls = _linear_fixed_point(1e-6, order, scale=0.1)
        assert len(calls) == steps
        tol = max(fixed_point_tolerance(1e-6, order), 1e-13)
        assert np.all(np.abs(u - exact).max(axis=1) <= tol * np.abs(exact).max(axis=1))
