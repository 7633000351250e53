"""A chain under a frozen activation pattern, in edge-residual coordinates.

The interior edges of the chain's sheaf are ``e_z_l = z_l - W_l a_(l-1) - b_l``
(``l = 1..k+1``, ``a_0 = x``) and ``e_a_l = a_l - m_l z_l`` (``l = 1..k``, the
mask ``m_l`` frozen).  ``delta_Omega`` is unit lower triangular, so the
residuals determine the state by forward substitution (:func:`forward`), and
every coordinate is an affine function of them.  The gradient of one
coordinate (a *row*: an output, or a hidden ``z`` held on its switching
surface) with respect to the residuals is its backpropagation adjoint
(:class:`RowAdjoints`): ``d row / d e_z_l`` is the adjoint at ``z_l``,
``d row / d e_a_l`` the adjoint at ``a_l``.  Rows of every sample are
propagated together, one matrix product per layer for the whole batch.

Arrays hold samples in rows: ``X`` is ``(S, n_0)``, ``masks[l - 1]`` is
``(S, n_l)`` with 0/1 floats, row adjoints are ``(S, r, n_l)``.
"""

import numpy as np

from ...network.model import parameter_offsets


def unpack(theta, dims):
    """``(Ws, bs)``: views of the weight matrices ``(n_l, n_(l-1))`` and biases in the flat ``theta``.

    Examples
    --------
    >>> import numpy as np
    >>> Ws, bs = unpack(np.arange(13.0), [2, 3, 1])
    >>> Ws[1].tolist(), bs[1].tolist()
    ([[9.0, 10.0, 11.0]], [12.0])
    """
    woff, boff, _ = parameter_offsets(dims)
    Ws = [theta[woff[l]:woff[l] + dims[l] * dims[l - 1]].reshape(dims[l], dims[l - 1]) for l in range(1, len(dims))]
    bs = [theta[boff[l]:boff[l] + dims[l]] for l in range(1, len(dims))]
    return Ws, bs


def forward(Ws, bs, X, masks, ez=None, ea=None):
    """``(Zs, As)``: ``z_l = W_l a_(l-1) + b_l + e_z_l`` and ``a_l = m_l z_l + e_a_l`` (forward substitution).

    ``masks=None`` applies ReLU instead (``z >= 0`` active): with no residuals, the forward pass.
    ``Zs[l - 1]`` is ``z_l`` (``l = 1..k+1``), ``As[l - 1]`` is ``a_l`` (``l = 1..k``).
    """
    Zs, As = [], []
    a = X
    for l, (W, b) in enumerate(zip(Ws, bs)):
        z = a @ W.T
        z += b
        if ez is not None:
            z += ez[l]
        Zs.append(z)
        if l < len(Ws) - 1:
            a = np.where(z >= 0, z, 0.0) if masks is None else masks[l] * z
            if ea is not None:
                a += ea[l]
            As.append(a)
    return Zs, As


def backward(Ws, masks, u):
    """``(ez, ea)`` = ``J^T u``: the residuals of output coefficients ``u`` (``(S, n_out)``), one backward
    substitution per sample (backpropagation of ``u`` through the frozen pattern)."""
    k = len(Ws) - 1
    ez, ea = [None] * (k + 1), [None] * k
    ez[k] = u
    for l in range(k, 0, -1):
        ea[l - 1] = ez[l] @ Ws[l]
        ez[l - 1] = masks[l - 1] * ea[l - 1]
    return ez, ea


def state_shift(Ws, masks, ez, ea):
    """``[J_l e]``: how far the residuals ``(ez, ea)`` move every ``z_l`` (``l = 1..k+1``, the output last),
    one forward substitution per sample (``a_l`` moves by ``m_l`` times ``z_l``'s shift plus ``e_a_l``)."""
    dz = ez[0]
    shifts = [dz]
    for l in range(1, len(Ws)):
        dz = (masks[l - 1] * dz + ea[l - 1]) @ Ws[l].T + ez[l]
        shifts.append(dz)
    return shifts


class RowAdjoints:
    """The adjoints of ``r`` rows per sample through a chain with a frozen pattern.

    Parameters
    ----------
    Ws : list of ndarray
        Weight matrices.
    masks : list of ndarray
        ``(S, n_l)`` 0/1 masks of the hidden layers.
    n_samples : int
    top : ndarray, shape (S, r, n_out), optional
        Each row's coefficients on the output ``z_(k+1)``; default the identity (the ``n_out`` outputs).
    seeds : dict, optional
        ``{l: (S, r, n_l)}``: coefficients on the hidden ``z_l`` (rows that read hidden coordinates).

    Attributes
    ----------
    Ga : list of ndarray
        ``Ga[l - 1]``, ``(S, r, n_l)``: the rows' adjoints at ``a_l``.
    """

    def __init__(self, Ws, masks, n_samples, top=None, seeds=None):
        self.masks, self.top, self.seeds, self.n_samples = masks, top, seeds or {}, n_samples
        k = len(Ws) - 1
        n_out = Ws[-1].shape[0]
        self.r = n_out if top is None else top.shape[1]
        self.Ga = [None] * k
        if k == 0:
            return
        if top is None:
            self.Ga[k - 1] = np.broadcast_to(Ws[k], (n_samples, n_out, Ws[k].shape[1]))
        else:
            self.Ga[k - 1] = _times(top, Ws[k])
        for l in range(k - 1, 0, -1):
            self.Ga[l - 1] = _times(self.Gz(l + 1), Ws[l])

    def Gz(self, l):
        """The rows' adjoints at ``z_l`` (``l <= k``): ``m_l`` times those at ``a_l``, plus the seed at ``z_l``."""
        G = self.masks[l - 1][:, None, :] * self.Ga[l - 1]
        if l in self.seeds:
            G = G + self.seeds[l]
        return G

    def gram(self):
        """``(S, r, r)``: ``J J^T``, the rows' Gram matrix over all interior edge residuals."""
        if self.top is None:
            G = np.zeros((self.n_samples, self.r, self.r))
            G[:, np.arange(self.r), np.arange(self.r)] = 1.0
        else:
            G = self.top @ np.swapaxes(self.top, 1, 2)
        for l, Ga in enumerate(self.Ga, start=1):
            if l in self.seeds:
                Gz = self.Gz(l)
                G += Gz @ np.swapaxes(Gz, 1, 2) + Ga @ np.swapaxes(Ga, 1, 2)
            else:   # Gz Gz^T + Ga Ga^T with Gz = m Ga and m^2 = m
                G += (Ga * (1.0 + self.masks[l - 1][:, None, :])) @ np.swapaxes(Ga, 1, 2)
        return G

    def residuals(self, v):
        """``(ez, ea)``: the residuals ``J^T v`` of coefficients ``v`` (``(S, r)``), block by block.

        One backward substitution per sample (``e_z_l`` is the adjoint of ``v`` at ``z_l``).
        """
        ea = [np.einsum("sr,srn->sn", v, Ga) for Ga in self.Ga]
        ez = []
        for l in range(1, len(self.Ga) + 1):
            e = self.masks[l - 1] * ea[l - 1]
            if l in self.seeds:
                e += np.einsum("sr,srn->sn", v, self.seeds[l])
            ez.append(e)
        ez.append(v.copy() if self.top is None else np.einsum("sr,srn->sn", v, self.top))
        return ez, ea


def _times(G, W):
    """``G @ W`` for a stack ``G`` ``(S, r, n)`` and one matrix ``W`` ``(n, m)``: one matrix product."""
    S, r, n = G.shape
    return (np.ascontiguousarray(G).reshape(S * r, n) @ W).reshape(S, r, W.shape[1])
