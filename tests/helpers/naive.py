"""Naive dense counterparts written from the paper's definitions (section 3, appendix A).

Nothing here uses sheaflinalg's layout or assembler: stalks, restriction maps
and the coboundary are built one edge at a time with dense numpy.
"""

import numpy as np


def phi(name, z):
    if name == "identity":
        return z.copy()
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-z))
    if name == "tanh":
        return np.tanh(z)
    e = np.exp(z - z.max())
    return e / e.sum()


def phi_jacobian(name, z):
    y = phi(name, z)
    if name == "identity":
        return np.eye(z.size)
    if name == "sigmoid":
        return np.diag(y * (1 - y))
    if name == "tanh":
        return np.diag(1 - y ** 2)
    return np.diag(y) - np.outer(y, y)


def forward(Ws, bs, output, x):
    """Plain forward pass, one sample; returns (zs, activations, yhat)."""
    return frozen_solution(Ws, bs, output, x, None)


def masks_of(net, x, pattern):
    """The masks of a frozen pattern, or those the forward pass of ``x`` reads when ``pattern`` is None."""
    if pattern is not None:
        return [np.asarray(m, dtype=bool) for m in pattern]
    return [z[0] >= 0 for z in net.forward_states(x)[0][:-1]]


def frozen_solution(Ws, bs, output, x, masks):
    """Forward substitution with a frozen pattern (proposition 'forward pass as harmonic extension').

    ``masks=None`` uses each layer's own sign pattern: the plain forward pass.
    """
    a = x
    zs, acts = [], []
    for l, (W, b) in enumerate(zip(Ws, bs)):
        z = W @ a + b
        zs.append(z)
        if l < len(Ws) - 1:
            a = np.maximum(z, 0.0) if masks is None else masks[l] * z
            acts.append(a)
    return zs, acts, phi(output, zs[-1])


def sheaf(Ws, bs, output, x, masks, reduced=False):
    """Dense coboundary of the neural sheaf, built edge by edge.

    Returns a dict with the full ``delta``, the free/boundary column masks,
    the boundary values ``u``, the edge offset of the linearised output edge,
    and the free-coordinate order as a list of (name, size).
    """
    dims = [Ws[0].shape[1]] + [W.shape[0] for W in Ws]
    k = len(Ws) - 1
    # Vertices along the path with stalk sizes and which coordinates are fixed.
    vertices = [("v_x", dims[0] + dims[1], [True] * (dims[0] + dims[1]))]
    for l in range(1, k + 1):
        vertices.append((f"v_z{l}", dims[l], [False] * dims[l]))
        vertices.append((f"v_a{l}", dims[l] + dims[l + 1], [False] * dims[l] + [True] * dims[l + 1]))
    vertices.append((f"v_z{k + 1}", dims[k + 1], [False] * dims[k + 1]))
    if not reduced:
        vertices.append(("v_y", dims[k + 1], [False] * dims[k + 1]))
    offset, start = 0, {}
    for name, size, _ in vertices:
        start[name] = offset
        offset += size
    n_full = offset
    fixed = np.concatenate([np.array(f, dtype=bool) for _, _, f in vertices])

    zs, _, _ = frozen_solution(Ws, bs, output, x, masks)
    edges = []  # (upstream vertex, F_up, downstream vertex, F_down)
    upstream = "v_x"
    for l in range(1, k + 2):
        Wbar = np.hstack([Ws[l - 1], np.diag(bs[l - 1])])
        edges.append((upstream, Wbar, f"v_z{l}", np.eye(dims[l])))
        if l <= k:
            R = np.diag(masks[l - 1].astype(float))
            P = np.hstack([np.eye(dims[l]), np.zeros((dims[l], dims[l + 1]))])
            edges.append((f"v_z{l}", R, f"v_a{l}", P))
            upstream = f"v_a{l}"
    offset_vec = []
    if not reduced:
        J = phi_jacobian(output, zs[-1])
        edges.append((f"v_z{k + 1}", J, "v_y", np.eye(dims[k + 1])))
    rows = []
    for up, Fu, down, Fd in edges:
        row = np.zeros((Fu.shape[0], n_full))
        row[:, start[up]:start[up] + Fu.shape[1]] -= Fu
        row[:, start[down]:start[down] + Fd.shape[1]] += Fd
        rows.append(row)
        offset_vec.append(np.zeros(Fu.shape[0]))
    if not reduced and output != "identity":
        J = phi_jacobian(output, zs[-1])
        offset_vec[-1] = J @ zs[-1] - phi(output, zs[-1])
    delta = np.vstack(rows)
    full_values = np.zeros(n_full)
    full_values[start["v_x"]:start["v_x"] + dims[0]] = x
    full_values[start["v_x"] + dims[0]:start["v_x"] + dims[0] + dims[1]] = 1.0
    for l in range(1, k + 1):
        o = start[f"v_a{l}"] + dims[l]
        full_values[o:o + dims[l + 1]] = 1.0
    return {"delta": delta, "free": ~fixed, "fixed": fixed, "u": full_values[fixed],
            "edge_offset": np.concatenate(offset_vec), "dims": dims}


def reduced_laplacian_formula(Ws, masks):
    """Block-tridiagonal matrix of appendix A (eq. lap-klayer), dense."""
    dims = [Ws[0].shape[1]] + [W.shape[0] for W in Ws]
    k = len(Ws) - 1
    sizes = []
    for l in range(1, k + 1):
        sizes += [dims[l], dims[l]]
    sizes.append(dims[k + 1])
    offs = np.concatenate([[0], np.cumsum(sizes)])
    L = np.zeros((offs[-1], offs[-1]))
    for l in range(1, k + 1):
        R = np.diag(masks[l - 1].astype(float))
        n = dims[l]
        W_next = Ws[l]
        A = np.block([[np.eye(n) + R, -R], [-R, np.eye(n) + W_next.T @ W_next]])
        o = offs[2 * (l - 1)]
        L[o:o + 2 * n, o:o + 2 * n] = A
    # Off-diagonal blocks couple a_{l-1} with z_l through -W_l.
    for l in range(2, k + 2):
        zo = offs[2 * (l - 1)]
        ao = offs[2 * (l - 2) + 1]
        n, m = Ws[l - 1].shape
        L[zo:zo + n, ao:ao + m] = -Ws[l - 1]
        L[ao:ao + m, zo:zo + n] = -Ws[l - 1].T
    o = offs[2 * k]
    L[o:, o:] = np.eye(dims[k + 1])
    return L


# ---------------------------------------------------------------- the exact flow's event scan, in numpy

class ExponentialSums:
    """``w_j(t) = c_j + sum_k C_jk exp(-mu_k t)`` (vectorised over times): the naive twin's provider
    for the generic scan (:func:`sheaflinalg.dynamics.exact.expm.first_event`), against which the
    compiled scan (:func:`sheaflinalg.kernels.exact.scan.first_event`) is tested."""

    def __init__(self, c, C, mu):
        from sheaflinalg.dynamics.exact.dense import merge_equal_rates

        self.roundoff = 8 * np.finfo(float).eps * (np.abs(c) + np.abs(C).sum(axis=1))
        self.c, self.C, self.mu = (c,) + merge_equal_rates(C, mu)
        self.absC = np.abs(self.C)

    def values(self, t):
        """``w`` (n_j, n_t), ``w'``, and the bounds ``B1``, ``B2`` at times ``t`` (1-D)."""
        E = np.exp(-np.outer(self.mu, t))
        return (self.c[:, None] + self.C @ E, -(self.C * self.mu) @ E, (self.absC * self.mu) @ E,
                (self.absC * self.mu ** 2) @ E)

    def one(self, j, t):
        return self.c[j] + self.C[j] @ np.exp(-self.mu * t)

    def never_again(self, T):
        return bool(np.all(self.c > self.absC @ np.exp(-self.mu * T)))


def convergence_time(beta, mu, tol):
    """Smallest ``t`` with ``||sum_k beta_k e^{-mu_k t} q_k|| <= tol`` (``Q`` orthonormal), by scipy's brentq."""
    from scipy.optimize import brentq

    norm = float(np.linalg.norm(beta))
    if norm <= tol:
        return 0.0
    upper = np.log(norm / tol) / mu.min()

    def gap(t):
        return 0.5 * np.log(np.sum(beta ** 2 * np.exp(-2 * mu * t))) - np.log(tol)
    return brentq(gap, 0.0, upper, xtol=1e-300, rtol=4 * np.finfo(float).eps) if gap(upper) < 0 else upper
