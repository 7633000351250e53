"""The naive dense twin of the joint dynamics (section 5.2, appendix C): one Euler step built from
``naive.sheaf``'s per-sample coboundaries, the loss and regularisation gradients, and targets."""

import numpy as np

from helpers import naive
import sheaflinalg as sl

#: The loss parameter each loss is run with (p of pnorm, delta of huber).
LOSS_PARAM = {"mse": 0.0, "l1": 0.0, "pnorm": 1.7, "huber": 0.3, "cross_entropy": 0.0}


def grad_f(loss, p, d):
    """Gradient of the loss ``f`` at the discrepancy ``d`` (for cross-entropy: ``d`` itself)."""
    if loss in ("mse", "cross_entropy"):
        return d
    if loss == "l1":
        return np.sign(d)
    if loss == "pnorm":
        return np.abs(d) ** (p - 2) * d * (d != 0)
    return np.clip(d, -p, p)


def reg_grad(kind, strength, ratio, d):
    """Gradient of the regularisation potential (the force is minus this)."""
    if kind == "l2":
        return strength * d
    if kind == "l1":
        return strength * np.sign(d)
    return strength * (ratio * np.sign(d) + (1 - ratio) * d)


def split(net, state):
    """Per-sample z, a lists from a (M, n_free) state, block by block (no Layout offsets)."""
    dims, k = net.dims, net.n_hidden
    zs, acts, o = [], [], 0
    for l in range(1, k + 2):
        zs.append(state[:, o:o + dims[l]]); o += dims[l]
        if l <= k:
            acts.append(state[:, o:o + dims[l]]); o += dims[l]
    return zs, acts, o


def naive_step(net, X, Y, state, loss, p, alpha, beta, dt, reg=None, state0=None, theta0=None):
    """One Euler step of eq. (regularized-general-dynamics) from dense per-sample coboundaries.

    The linear part comes from the dense coboundary of the neural sheaf
    (``naive.sheaf``, output edge dropped); the output edge adds
    ``-J^T grad f(phi(z) - y)`` (or ``-(phi(z) - y)`` for cross-entropy); the
    weights move by ``-beta Pi_W(delta omega omega^T)`` summed over samples.
    """
    dims, k = net.dims, net.n_hidden
    Ws, bs = net.weights, net.biases
    zs, acts, n_move = split(net, state)
    new_state = state.copy()
    gW = [np.zeros_like(W) for W in Ws]
    gb = [np.zeros_like(b) for b in bs]
    for s in range(X.shape[0]):
        masks = [zs[l][s] >= 0 for l in range(k)]
        sh = naive.sheaf(Ws, bs, "identity", X[s], masks, reduced=True)
        delta = sh["delta"]
        full = np.zeros(delta.shape[1])
        full[sh["fixed"]] = sh["u"]
        full[sh["free"]] = state[s, :n_move]
        e = delta @ full
        force = -(delta.T @ e)[sh["free"]]
        z_out = zs[k][s]
        d = naive.phi(net.output, z_out) - Y[s]
        g = grad_f(loss, p, d)
        if loss != "cross_entropy":
            g = naive.phi_jacobian(net.output, z_out).T @ g
        force[n_move - dims[-1]:] -= g
        # Weight edges: rows of e for e_z(l); upstream extended stalk from `full`.
        row = 0
        ups = [np.concatenate([X[s], np.ones(dims[1])])]
        for l in range(1, k + 1):
            ups.append(np.concatenate([acts[l - 1][s], np.ones(dims[l + 1])]))
        for l in range(1, k + 2):
            el = e[row:row + dims[l]]
            grad_Fup = -np.outer(el, ups[l - 1])              # d(1/2|e|^2)/d(F_up), F_up = [W diag(b)]
            gW[l - 1] += grad_Fup[:, :dims[l - 1]]
            gb[l - 1] += np.diag(grad_Fup[:, dims[l - 1]:])   # Pi_W keeps the diagonal of the bias block
            row += dims[l] + (dims[l] if l <= k else 0)
        if reg is not None and reg.lam > 0:
            anchor = state0[s, :n_move] if reg.anchor == "initial" else 0.0
            force -= reg_grad(reg.kind, reg.lam, reg.l1_ratio, state[s, :n_move] - anchor)
        new_state[s, :n_move] = state[s, :n_move] + alpha * dt * force
    theta = net.parameters()
    grad = np.concatenate([np.concatenate([a.ravel(), b]) for a, b in zip(gW, gb)])
    if reg is not None and reg.mu > 0:
        anchor = theta0 if reg.anchor == "initial" else 0.0
        grad = grad + reg_grad(reg.kind, reg.mu, reg.l1_ratio, theta - anchor)
    theta_new = theta - beta * dt * grad
    return sl.Network.from_parameters(theta_new, dims, net.output), new_state


def targets(net, M, rng):
    """Random targets for ``M`` samples and the loss they go with (None: any regression loss)."""
    n = net.dims[-1]
    if net.output == "softmax":
        return np.eye(n)[rng.integers(0, n, M)], "cross_entropy"
    if net.output == "sigmoid":
        return (rng.random((M, n)) < 0.5).astype(float), "cross_entropy"
    return rng.normal(size=(M, n)), None
