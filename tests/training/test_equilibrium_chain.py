"""Exact equilibria of chain MLPs against the definitions: a dense twin, a long Euler run, backpropagation,
the nudging's bias orders and the quasi-static limit of the paper's joint dynamics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import naive
from helpers.strategies import networks
import sheaflinalg as sl
from sheaflinalg.training.equilibrium.chain import ChainEquilibrium
from sheaflinalg.training.equilibrium.loss_edge import NudgingTooNegative, fixed_point_tolerance, takes_fixed_point

LOSSES = {"identity": ("mse",), "tanh": ("mse",), "sigmoid": ("mse", "cross_entropy"),
          "softmax": ("mse", "cross_entropy")}


# ---------------------------------------------------------------- the dense twin, from the definitions
def dense_energy(net, x, masks):
    """``(D, r0)``: the interior edge residuals ``e = D w + r0`` of the free coordinates ``w`` (order z1, a1, ...,
    z(k+1)), from the dense coboundary of the sheaf with the pattern ``masks`` (output edge dropped)."""
    sh = naive.sheaf(net.weights, net.biases, "identity", x, masks, reduced=True)
    delta = sh["delta"]
    return delta[:, sh["free"]], delta[:, sh["fixed"]] @ sh["u"]


def loss_terms(output, loss, z, y):
    """Potential, gradient and Hessian of the nudged edge in ``z``, written from the losses' formulas."""
    p = naive.phi(output, z)
    if loss == "cross_entropy" and output == "softmax":
        value = np.log(np.exp(z - z.max()).sum()) + z.max() - y @ z
        return value, p - y, np.diag(p) - np.outer(p, p)
    if loss == "cross_entropy":
        value = np.sum(np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) - y * z)
        return value, p - y, np.diag(p * (1 - p))
    J = naive.phi_jacobian(output, z)
    return 0.5 * np.sum((p - y) ** 2), J.T @ (p - y), J.T @ J


def split_sample(net, w):
    """Per-layer z and a blocks of one sample's free vector (no layout offsets)."""
    dims, o, zs, acts = net.dims, 0, [], []
    for l in range(1, len(dims)):
        zs.append(w[o:o + dims[l]]); o += dims[l]
        if l < len(dims) - 1:
            acts.append(w[o:o + dims[l]]); o += dims[l]
    return zs, acts


def z_index(net, l, j):
    dims = net.dims
    return sum(2 * dims[m] for m in range(1, l)) + j


def dense_minimiser(net, x, y, masks, b, loss, held=()):
    """The energy's minimiser with the pattern frozen (and ``held`` z coordinates at 0): damped Newton on dense
    matrices (the energy is convex in the free coordinates for these losses)."""
    D, r0 = dense_energy(net, x, masks)
    n, n_out = D.shape[1], net.dims[-1]
    keep = np.ones(n, dtype=bool)
    for l, j in held:
        keep[z_index(net, l, j)] = False

    def energy(w):
        return 0.5 * np.sum((D @ w + r0) ** 2) + b * loss_terms(net.output, loss, w[-n_out:], y)[0]
    w = np.zeros(n)
    w[keep] = np.linalg.lstsq(D[:, keep], -r0, rcond=None)[0]
    for _ in range(200):
        _, g, H = loss_terms(net.output, loss, w[-n_out:], y)
        grad = D.T @ (D @ w + r0)
        grad[-n_out:] += b * g
        hess = D.T @ D
        hess[-n_out:, -n_out:] += b * H
        step = np.zeros(n)
        step[keep] = np.linalg.solve(hess[np.ix_(keep, keep)], -grad[keep])
        t = 1.0
        while energy(w + t * step) > energy(w) + 1e-4 * t * grad @ step and t > 1e-10:
            t /= 2
        w = w + t * step
        if np.abs(t * step).max() < 1e-14 * (1 + np.abs(w).max()):
            break
    return w


def energy_gradient(net, x, y, w, b, loss):
    """The gradient of the true energy (pattern read off ``w``) at the free vector ``w``, and that pattern."""
    zs, _ = split_sample(net, w)
    masks = [z >= 0 for z in zs[:-1]]
    D, r0 = dense_energy(net, x, masks)
    n_out = net.dims[-1]
    grad = D.T @ (D @ w + r0)
    grad[-n_out:] += b * loss_terms(net.output, loss, w[-n_out:], y)[1]
    return grad, masks


def random_batch(net, seed, n=4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, net.dims[0]))
    n_out = net.dims[-1]
    if net.output == "softmax":
        Y = np.eye(n_out)[rng.integers(0, n_out, n)]
    elif net.output == "sigmoid":
        Y = (rng.random((n, n_out)) < 0.5).astype(float)
    else:
        Y = rng.normal(size=(n, n_out))
    return X, Y


@st.composite
def cases(draw, max_hidden=3, max_width=8):
    net, seed = draw(networks(max_hidden, max_width))
    loss = draw(st.sampled_from(LOSSES[net.output]))
    b = draw(st.sampled_from([1e-3, 0.1, 1.0, 3.0]))
    X, Y = random_batch(net, seed)
    if draw(st.booleans()):         # zero pre-activations: zero biases and inputs make every z exactly 0
        net = sl.Network(net.weights, [np.zeros_like(v) for v in net.biases], net.output)
        X[: X.shape[0] // 2] = 0.0
    return net, X, Y, loss, b


def _fixed_point_slack(net, x, y, pattern, b, loss, held, twin):
    """How far beyond rounding a frozen solve may be from the dense minimiser ``twin``: when it takes the fixed
    point, ten times its declared tolerance of the nudging's displacement (``twin`` against the minimiser at a
    thousandth of ``b``); 0 on the Gram path."""
    if not takes_fixed_point(b, len(held)):
        return 0.0
    move = twin - dense_minimiser(net, x, y, pattern, 1e-3 * b, loss, held)
    return 10 * fixed_point_tolerance(b, 1) * np.abs(move).max()


# ---------------------------------------------------------------- the equilibrium is the exact minimiser
@settings(max_examples=40)
@given(cases())
def test_equilibrium_is_the_dense_minimiser_and_self_consistent(case):
    net, X, Y, loss, b = case
    eq = ChainEquilibrium(net.dims, net.output, loss).settle(net.parameters(), X, Y, b)
    assert eq.report.unsettled == 0
    n_out = net.dims[-1]
    for s in range(X.shape[0]):
        w = eq.state[s, :-n_out]                           # free coordinates without yhat
        scale = 1 + np.abs(w).max()
        grad, masks = energy_gradient(net, X[s], Y[s], w, b, loss)
        held = eq.sliding[s]
        # The pattern read off x* is the pattern used, except on the switching surfaces.
        for l, (m, used) in enumerate(zip(masks, eq.pattern), start=1):
            differ = {(l, int(j)) for j in np.flatnonzero(m != used[s])}
            assert differ <= set(held)
        zs, acts = split_sample(net, w)
        for l, j in held:
            assert abs(zs[l - 1][j]) <= 1e-10 * scale
            # Filippov: q >= 0 pushes up from below, q + a <= 0 pushes down from above; the force
            # q + theta a = 0 with theta in [0, 1] is the energy's one-sided derivative there.
            a_prev = X[s] if l == 1 else acts[l - 2]
            q = net.weights[l - 1][j] @ a_prev + net.biases[l - 1][j]
            a = acts[l - 1][j]
            assert q >= -1e-9 * scale and q + a <= 1e-9 * scale
            grad[z_index(net, l, j)] = 0.0
        # The energy's gradient vanishes at x* (to the solver's rounding).
        assert np.abs(grad).max() <= 1e-9 * scale * (1 + abs(b))
        # Same state as the dense minimiser under the same pattern (a strictly convex problem).
        if loss == "cross_entropy" or net.output == "identity":
            twin = dense_minimiser(net, X[s], Y[s], [p[s] for p in eq.pattern], b, loss, held)
            slack = _fixed_point_slack(net, X[s], Y[s], [p[s] for p in eq.pattern], b, loss, held, twin)
            assert np.allclose(w, twin, rtol=1e-8, atol=1e-9 * scale + slack)
        # yhat holds the targets; the reported residuals are the state's.
        assert np.array_equal(eq.state[s, -n_out:], Y[s])
        e = eq.residuals[s, :-n_out]
        D, r0 = dense_energy(net, X[s], [p[s] for p in eq.pattern])
        assert np.allclose(e, D @ w + r0, atol=1e-10 * scale)
        assert np.allclose(eq.residuals[s, -n_out:], Y[s] - naive.phi(net.output, zs[-1]), atol=1e-12)
        assert np.isclose(eq.energy[s], 0.5 * e @ e + b * loss_terms(net.output, loss, zs[-1], Y[s])[0],
                          rtol=1e-10, atol=1e-12)


PATTERNS = ("all_active", "all_dead", "random")


@settings(max_examples=30)
@given(cases(), st.sampled_from(PATTERNS))
def test_frozen_solve_matches_dense_twin_for_any_pattern(case, kind):
    from sheaflinalg.training.equilibrium.chain_linear import unpack
    from sheaflinalg.training.equilibrium.frozen import frozen_equilibrium
    net, X, Y, loss, b = case
    if not (loss == "cross_entropy" or net.output == "identity"):
        loss, net = "mse", sl.Network(net.weights, net.biases, "identity")
    rng = np.random.default_rng(len(kind))
    hidden = net.dims[1:-1]
    make = {"all_active": np.ones, "all_dead": np.zeros,
            "random": lambda shape: (rng.random(shape) < 0.5).astype(float)}[kind]
    masks = [make((X.shape[0], n)).astype(float) for n in hidden]
    Ws, bs = unpack(net.parameters(), net.dims)
    fr = frozen_equilibrium(Ws, bs, X, Y, masks, b, net.output, loss)
    for s in range(X.shape[0]):
        twin = dense_minimiser(net, X[s], Y[s], [m[s] > 0 for m in masks], b, loss)
        zs, acts = split_sample(net, twin)
        slack = _fixed_point_slack(net, X[s], Y[s], [m[s] > 0 for m in masks], b, loss, [], twin)
        for mine, ref in zip(fr.Zs + fr.As, zs + acts):
            assert np.allclose(mine[s], ref, rtol=1e-8, atol=1e-9 * (1 + np.abs(twin).max()) + slack)


def test_sliding_equilibria_occur_and_hold_their_coordinates_on_the_surface():
    # The paraboloid net at nudging 1 cycles between patterns for some samples: Filippov equilibria.
    net = sl.Network.random([2, 8, 1], seed=0)
    X, Y = sl.tasks.paraboloid(20, seed=0)
    eq = ChainEquilibrium(net.dims).settle(net.parameters(), X, Y, 1.0)
    assert eq.report.sliding == sum(map(len, eq.sliding)) > 0 and eq.report.unsettled == 0
    for s in np.flatnonzero([bool(h) for h in eq.sliding]):
        twin = dense_minimiser(net, X[s], Y[s], [p[s] for p in eq.pattern], 1.0, "mse", eq.sliding[s])
        assert np.allclose(eq.state[s, :-1], twin, atol=1e-10)


def test_long_euler_run_of_the_state_alone_ends_at_the_equilibrium():
    # Gradient descent of the true (piecewise quadratic) energy, pattern read off the state at every step,
    # from the forward pass.  The energy is not convex (ReLU kinks): at nudging 0.5 the run of sample 0 ends
    # at another local minimum, a Filippov one, than the pattern iteration's; at 0.1 the minimum is the same.
    net = sl.Network.random([3, 5, 4, 2], seed=3)
    X, Y = random_batch(net, 3, n=3)
    b = 0.1
    eq = ChainEquilibrium(net.dims).settle(net.parameters(), X, Y, b)
    for s in range(X.shape[0]):
        zs, _, _ = naive.forward(net.weights, net.biases, "identity", X[s])
        w = np.concatenate([v for z in zs[:-1] for v in (z, np.maximum(z, 0))] + [zs[-1]])
        coboundaries = {}                               # the dense coboundary of each pattern met
        for _ in range(6000):
            masks = [z >= 0 for z in split_sample(net, w)[0][:-1]]
            key = b"".join(np.packbits(m).tobytes() for m in masks)
            if key not in coboundaries:
                coboundaries[key] = dense_energy(net, X[s], masks)
            D, r0 = coboundaries[key]
            grad = D.T @ (D @ w + r0)
            grad[-2:] += b * (w[-2:] - Y[s])
            w = w - 0.1 * grad
        assert np.allclose(w, eq.state[s, :-2], atol=1e-7)


# ---------------------------------------------------------------- g / nudging against backpropagation
def backprop(net, X, Y, loss):
    """Gradient of the reported mean loss by plain backpropagation (``z >= 0`` active), flat like theta."""
    zs, acts = [], [X]
    for l, (W, b) in enumerate(zip(net.weights, net.biases)):
        zs.append(acts[-1] @ W.T + b)
        if l < net.n_hidden:
            acts.append(np.maximum(zs[-1], 0))
    S, n_out = Y.shape
    P = np.stack([naive.phi(net.output, z) for z in zs[-1]])
    if loss == "cross_entropy":
        delta = (P - Y) / S
    else:
        delta = np.stack([naive.phi_jacobian(net.output, z).T @ (p - y) for z, p, y in zip(zs[-1], P, Y)])
        delta *= 2 / (S * n_out)
    grads = []
    for l in range(net.n_hidden, -1, -1):
        grads.append((delta.T @ acts[l], delta.sum(axis=0)))
        if l:
            delta = (delta @ net.weights[l]) * (zs[l - 1] >= 0)
    return np.concatenate([np.concatenate([gW.ravel(), gb]) for gW, gb in reversed(grads)])


@settings(max_examples=30)
@given(cases())
def test_gradient_over_nudging_is_backprop_at_small_nudging(case):
    net, X, Y, loss, _ = case
    zs, _ = net.forward_states(X)
    if any(np.abs(z).min() < 1e-4 for z in zs[:-1]):        # backprop's gradient jumps there
        net = sl.Network(net.weights, [v + 0.0 for v in net.biases], net.output)
        X = X + 0.37
        zs, _ = net.forward_states(X)
        if any(np.abs(z).min() < 1e-4 for z in zs[:-1]):
            return
    oracle = ChainEquilibrium(net.dims, net.output, loss)
    g = np.full(net.n_parameters, np.nan)
    report = oracle.gradient(net.parameters(), X, Y, 1e-8, g)
    ref = backprop(net, X, Y, loss)
    assert report.iterations == 1 and report.sliding == 0
    assert np.abs(g - ref).max() <= 1e-6 * (1 + np.abs(ref).max())


def test_nudging_bias_is_first_order_one_sided_and_second_order_symmetric():
    net = sl.Network.random([3, 6, 5, 2], seed=1, output="softmax")
    X, Y = random_batch(net, 1, n=5)
    oracle = ChainEquilibrium(net.dims, net.output)
    theta = net.parameters()
    ref = backprop(net, X, Y, "cross_entropy")
    one, sym = [], []
    for b in (0.02, 0.01, 0.005):
        g_plus, g_minus = np.zeros_like(theta), np.zeros_like(theta)
        r_plus = oracle.gradient(theta, X, Y, b, g_plus)
        r_minus = oracle.gradient(theta, X, Y, -b, g_minus)
        assert r_plus.iterations == r_minus.iterations == 1     # same pattern: a smooth function of b
        one.append(np.linalg.norm(g_plus - ref))
        sym.append(np.linalg.norm(0.5 * (g_plus + g_minus) - ref))
    for k in range(2):
        assert 1.8 < one[k] / one[k + 1] < 2.2          # error ~ b
        assert 3.6 < sym[k] / sym[k + 1] < 4.4          # error ~ b^2
    assert sym[-1] < 0.05 * one[-1]


def test_gradient_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    net = sl.Network.random([4, 7, 6, 3], seed=2, output="softmax")
    X, Y = random_batch(net, 2, n=6)
    model = torch.nn.Sequential(torch.nn.Linear(4, 7), torch.nn.ReLU(), torch.nn.Linear(7, 6), torch.nn.ReLU(),
                                torch.nn.Linear(6, 3)).double()
    with torch.no_grad():
        for layer, W, b in zip(model[::2], net.weights, net.biases):
            layer.weight.copy_(torch.from_numpy(np.array(W)))
            layer.bias.copy_(torch.from_numpy(np.array(b)))
    loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(X)), torch.from_numpy(Y.argmax(axis=1)))
    loss.backward()
    ref = np.concatenate([np.concatenate([m.weight.grad.numpy().ravel(), m.bias.grad.numpy()]) for m in model[::2]])
    g = np.zeros(net.n_parameters)
    ChainEquilibrium(net.dims, net.output).gradient(net.parameters(), X, Y, 1e-8, g)
    assert np.abs(g - ref).max() < 1e-6 * (1 + np.abs(ref).max())


# ---------------------------------------------------------------- the quasi-static limit of the joint dynamics
def test_euler_joint_dynamics_approach_the_equilibrium_gradient_flow_as_beta_shrinks():
    net = sl.Network.random([2, 4, 1], seed=5)
    X, Y = sl.tasks.paraboloid(6, seed=5)
    oracle = ChainEquilibrium(net.dims)
    tau, scale = 0.4, 2.0 / (X.shape[0] * 1)        # loss_gradient_scale of the mse, 6 samples, 1 output

    def flow(theta):                                # d theta / d tau = -grad_theta E_1(x*(theta))
        g = np.zeros_like(theta)
        oracle.gradient(theta, X, Y, 1.0, g)
        return -g / scale
    theta = net.parameters()
    n = 200
    for _ in range(n):                              # RK4, fine
        h = tau / n
        k1 = flow(theta); k2 = flow(theta + h / 2 * k1); k3 = flow(theta + h / 2 * k2); k4 = flow(theta + h * k3)
        theta = theta + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    errors = []
    dt = 0.02
    for beta in (0.04, 0.02, 0.01):
        steps = int(round(tau / (beta * dt)))
        fit = sl.train(net, X, Y, alpha=1.0, beta=beta, dt=dt, steps=steps, epoch_steps=steps, init="forward",
                       loss="mse", stagnation=False, progress=False)
        errors.append(np.abs(fit.network.parameters() - theta).max())
    # theta moves by about 0.56 over the run; the error is first order in beta (measured 0.150, 0.082, 0.043).
    assert 1.6 < errors[0] / errors[1] < 2.4 and 1.6 < errors[1] / errors[2] < 2.4


# ---------------------------------------------------------------- bad input
def test_losses_without_an_exact_equilibrium_are_refused_naming_the_two():
    for loss in ("l1", "pnorm", "huber"):
        with pytest.raises(ValueError, match="mse and cross_entropy"):
            ChainEquilibrium([2, 3, 1], "identity", loss)


def test_bad_calls_are_refused_before_work():
    net = sl.Network.random([2, 3, 1], seed=0)
    oracle = ChainEquilibrium(net.dims)
    theta, X, Y = net.parameters(), np.zeros((4, 2)), np.zeros((4, 1))
    out = np.zeros(net.n_parameters)
    for b in (0.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="nudging"):
            oracle.gradient(theta, X, Y, b, out)
    with pytest.raises(TypeError, match="nudging"):
        oracle.gradient(theta, X, Y, "0.1", out)
    with pytest.raises(ValueError, match="theta"):
        oracle.gradient(theta[:-1], X, Y, 0.1, out)
    with pytest.raises(ValueError, match="X must have shape"):
        oracle.gradient(theta, np.zeros((4, 3)), Y, 0.1, out)
    with pytest.raises(ValueError, match="Y must have shape"):
        oracle.gradient(theta, X, np.zeros((3, 1)), 0.1, out)
    with pytest.raises(ValueError, match="out must be"):
        oracle.gradient(theta, X, Y, 0.1, np.zeros(3))
    bad = theta.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="diverged"):
        oracle.gradient(bad, X, Y, 0.1, out)
    with pytest.raises(ValueError, match="max_iter"):
        ChainEquilibrium(net.dims, max_iter=0)


def test_too_negative_nudging_is_reported_with_the_bound():
    net = sl.Network.random([2, 5, 1], seed=0)
    X, Y = sl.tasks.paraboloid(10, seed=0)
    oracle = ChainEquilibrium(net.dims)
    out = np.zeros(net.n_parameters)
    oracle.gradient(net.parameters(), X, Y, -0.01, out)                 # fine: I + b M stays definite
    with pytest.raises(NudgingTooNegative, match=r"too negative.*needs nudging > -0\.\d+"):
        oracle.gradient(net.parameters(), X, Y, -1.0, out)              # M >= I: never definite at b = -1


@settings(max_examples=20)
@given(cases(), st.sampled_from([1e-6, 1e-3, -1e-3]))
def test_fixed_point_and_gram_paths_give_the_same_equilibrium(case, b):
    from sheaflinalg.training.equilibrium import loss_edge
    net, X, Y, loss, _ = case
    oracle = ChainEquilibrium(net.dims, net.output, loss)
    fast = oracle.settle(net.parameters(), X, Y, b)
    saved = loss_edge.FIXED_POINT_NUDGING
    loss_edge.FIXED_POINT_NUDGING = 0.0            # every frozen solve through the Gram matrix
    try:
        gram = oracle.settle(net.parameters(), X, Y, b)
    finally:
        loss_edge.FIXED_POINT_NUDGING = saved
    # the fixed point stops within its declared tolerance of the exact (Gram) solution, or at rounding
    tol = max(loss_edge.fixed_point_tolerance(b, 1), 1e-11)
    scale = np.abs(gram.residuals).max() + 1e-300
    assert np.abs(fast.residuals - gram.residuals).max() <= 10 * tol * scale
    move = np.abs(gram.state - oracle.settle(net.parameters(), X, Y, 1e-3 * b).state).max()  # the nudging's
    assert np.abs(fast.state - gram.state).max() <= 1e-12 * (1 + np.abs(gram.state).max()) + 10 * tol * move
