"""The pinned solve's ``k x k`` system by conjugate gradients, for many held coordinates (a 1000-class head).

With ``k`` coordinates held (:mod:`~sheaflinalg.discord.pinning.graph`), the
pinned minimiser under a frozen pattern is ``w = w0 + L^{-1} E lam`` where
``lam`` solves the Schur complement system ``S lam = y - E^T w0``,
``S = E^T L^{-1} E``.  Forming ``G = L^{-1} E`` takes one substitution pair
per held coordinate and ``k x n_free`` numbers per sample (1000 x 8.2M for a
ResNet-18 on a 224 x 224 image: 66 GB).  ``S`` is symmetric positive definite
(``L^{-1} = delta^{-1} delta^{-T}``; in fact ``S >= I``: the output node's own
residual is one of the edges), so conjugate gradients solve it with one
product ``S p = E^T delta^{-1} delta^{-T} E p`` per step, a backward and a
forward substitution batched over the samples, and no matrix.  The state's
shift ``L^{-1} E lam`` is one more product at the end (accumulating each
step's full substitution alongside ``lam`` would pass over ``n_free`` numbers
per step: more than the one product for the usual few dozen steps).
"""

import numpy as np
from scipy import sparse

from ..._common.progress import progress_bar

#: Relative residual ``||S lam - rhs|| / ||rhs||`` at which the iteration stops.
TOL = 1e-12


def schur_cg(op, index, rhs, start=None, tol=TOL, maxiter=None, progress=False, precondition=None, minus=None):
    """``(lam, shift, steps)``: ``S lam = rhs`` per sample by conjugate gradients, ``shift = L^{-1} E lam``.

    Parameters
    ----------
    op : GraphCoboundary
        ``delta_Omega`` of the samples (each under its own pattern).
    index : ndarray of int, shape (k,)
        The held coordinates (free order): the columns of ``E``.
    rhs : ndarray, shape (M, k)
    start : ndarray, shape (M, k), optional
        First guess of ``lam`` (the previous pattern's solution): costs one extra product.
    tol : float
        Relative residual at which a sample stops.
    maxiter : int, optional
        Largest number of steps (default ``2 k + 20``; a sample that has not reached ``tol`` returns its
        last iterate: the caller's equilibrium test decides).
    progress : bool
        Show a bar of the steps.
    precondition : callable, optional
        ``precondition(r) -> P^{-1} r`` (rows are samples) for a symmetric positive definite ``P ~ S``.
    minus : ndarray of int, shape (k,), optional
        Per column, ``-1`` or the other entry of a pair held equal: the column ``e_i - e_j`` (``i`` from
        ``index``; ``rhs`` its target difference).  The columns must be independent.

    Returns
    -------
    lam : ndarray, shape (M, k)
    shift : ndarray, shape (M, n_free)
    steps : int
        Products with ``S`` used.
    directions : tuple of ndarray, shape (M, steps, k)
        The search directions ``p`` and their products ``S p`` (zero rows after a sample stopped): for
        :func:`recycled` to precondition the next, nearby system.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.network.graph.forward import evaluate
    >>> from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary
    >>> net = sl.Network.random([3, 5, 4], seed=0)
    >>> X = np.ones((2, 3))
    >>> op = GraphCoboundary(net.graph, evaluate(net.graph, X).pattern)
    >>> index = np.arange(op.layout.n_free - 4, op.layout.n_free)     # the output node's coordinates
    >>> lam, shift, _, _ = schur_cg(op, index, np.ones((2, 4)))
    >>> bool(np.allclose(shift[:, index], 1.0))                        # E^T L^-1 E lam = rhs
    True
    """
    M, k = rhs.shape
    maxiter = 2 * k + 20 if maxiter is None else maxiter
    product = _product(op, index, M, minus)
    lam, shift = np.zeros((M, k)), None
    r = rhs.copy()
    if start is not None:
        lam[...] = start
        s, shift = product(lam)         # the shift itself if no step follows
        r -= s
    scale = np.maximum(np.linalg.norm(rhs, axis=1), np.finfo(float).tiny)
    inverse = (lambda v: v) if precondition is None else precondition
    z = inverse(r)
    p, rz = z.copy(), np.einsum("ij,ij->i", r, z)
    steps, P, SP = 0, [], []
    with progress_bar(maxiter, progress, "pinned: conjugate gradients", unit="step") as bar:
        while steps < maxiter:
            live = np.linalg.norm(r, axis=1) > tol * scale
            if not live.any():
                break
            Sp = product(p)[0]
            steps += 1
            P.append(np.where(live[:, None], p, 0.0))
            SP.append(np.where(live[:, None], Sp, 0.0))
            alpha = np.where(live, rz / np.where(live, np.einsum("ij,ij->i", p, Sp), 1.0), 0.0)
            lam += alpha[:, None] * p
            r -= alpha[:, None] * Sp
            z = inverse(r)
            new = np.einsum("ij,ij->i", r, z)
            p = z + np.where(live, new / np.where(live, rz, 1.0), 0.0)[:, None] * p
            rz = new
            bar.update(1)
            bar.set_postfix(residual=f"{float(np.max(np.linalg.norm(r, axis=1) / scale)):.1e}", refresh=False)
    directions = (np.stack(P, axis=1), np.stack(SP, axis=1)) if steps else None
    if steps:
        shift = product(lam)[1]
    elif shift is None:
        shift = np.zeros((M, op.layout.n_free))
    return lam, shift, steps, directions


def recycled(Z, SZ):
    """``precondition(r)``: the limited-memory preconditioner of the directions ``Z`` (rows) and their
    products ``SZ`` with a nearby ``S`` (a previous pattern's), ``H = (I - Z E^-1 SZ^T)(I - SZ E^-1 Z^T) +
    Z E^-1 Z^T`` with ``E = Z^T S Z``: exact on the span of ``Z``, the identity elsewhere (``S >= I``).

    The directions are first made ``S``-orthonormal through the eigenvectors of ``E`` (symmetrised:
    directions of several solves share their span), dropping those of eigenvalues below ``1e-10`` of the
    largest, so ``H`` is symmetric positive definite whatever ``Z``.

    Parameters
    ----------
    Z, SZ : ndarray, shape (M, m, k)
        Per sample, ``m`` directions (zero rows are ignored) and their products.

    Examples
    --------
    >>> S = np.diag([1.0, 4.0, 9.0])[None]
    >>> Z = np.array([[[1.0, 0, 0], [0, 1, 0], [1, 1, 0]]])         # a dependent third direction
    >>> np.round(recycled(Z, Z @ S)(np.ones((1, 3))), 6)              # S^-1 on the span, 1 elsewhere
    array([[1.  , 0.25, 1.  ]])
    """
    E = Z @ SZ.transpose(0, 2, 1)                   # matrix products (BLAS): einsum does not use it here
    d, U = np.linalg.eigh((E + E.transpose(0, 2, 1)) / 2)
    keep = d > 1e-10 * np.maximum(d[:, -1:], np.finfo(float).tiny)
    U = U * np.where(keep, 1.0 / np.sqrt(np.where(keep, d, 1.0)), 0.0)[:, None, :]
    UT = U.transpose(0, 2, 1)
    Q, SQ = UT @ Z, UT @ SZ                         # Q^T S Q = I (kept)

    def precondition(r):
        t = (Q @ r[..., None])[..., 0]
        u = r - (t[:, None, :] @ SQ)[:, 0]
        return u - (((SQ @ u[..., None])[..., 0] - t)[:, None, :] @ Q)[:, 0]
    return precondition


def held_values(v, index, minus):
    """``E^T v`` along the last axis: the held coordinates' values (a pair's difference)."""
    return v[..., index] - np.where(minus >= 0, v[..., np.maximum(minus, 0)], 0.0)


def _product(op, index, M, minus=None):
    """``product(p) -> (S p, L^{-1} E p)``: a backward and a forward substitution of the samples (buffers
    reused by every step); ``minus``: :func:`schur_cg`'s pairs."""
    seeds, e, full = (np.zeros((M, op.layout.n_free)) for _ in range(3))
    pairs = minus is not None and bool(np.any(minus >= 0))
    if pairs:                   # E restricted to the entries it touches: pairs of a group share entries
        k = index.size
        pair = np.flatnonzero(minus >= 0)
        entries, rows = np.unique(np.concatenate([index, minus[pair]]), return_inverse=True)
        E = sparse.csr_matrix((np.concatenate([np.ones(k), -np.ones(pair.size)]),
                               (rows, np.concatenate([np.arange(k), pair]))), shape=(entries.size, k))

    def product(p):
        if pairs:               # seeds stay zero off these entries
            seeds[:, entries] = (E @ p.T).T
        else:
            seeds[:, index] = p
        op.solve(op.solve_transpose(seeds, out=e), out=full)
        return (held_values(full, index, minus) if pairs else full[:, index].copy()), full
    return product
