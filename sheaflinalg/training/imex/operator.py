"""The implicit part of an IMEX step of a chain: ``(I + c L_P)^-1`` for the pattern and weights of one state.

``L_P`` is the Hessian of the quadratic part of the discord energy on the
moving stalks with the ReLU pattern and the weights frozen (the interior
edges, and the output edge when it is quadratic: identity output with the
squared loss); see :mod:`sheaflinalg.kernels.implicit`.  One factorisation
per sample, held for as many solves as the integrator wants.
"""

import numpy as np

from ..._common.memory import check_memory
from ...kernels.implicit import chain_blocks, factor_chain, solve_chain


class ChainImplicitOperator:
    """``x -> (I + c L_P)^-1 x`` on the moving stalks ``(n_move, M)`` of a chain batch.

    Parameters
    ----------
    lay : KernelLayout
    M : int
        Samples in the batch.
    out_curv : float
        1 when the output edge is quadratic (taken implicitly), else 0 (explicit).

    Raises
    ------
    InsufficientMemoryError
        The factors of the batch would not fit in the memory available.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.layout import Layout
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> lay = Layout(net.dims).kernel_offsets()
    >>> op = ChainImplicitOperator(lay, 4, 1.0)
    >>> S = np.random.default_rng(0).standard_normal((lay.yhat_off, 4))
    >>> op.factor(S, net.parameters(), 0.0)        # c = 0: the identity
    >>> bool(np.allclose(op.solve(S), S))
    True
    """

    def __init__(self, lay, M, out_curv):
        self.lay, self.M, self.out_curv = lay, M, float(out_curv)
        self.n_move = int(lay.yhat_off)
        size, loff, goff = chain_blocks(lay.dims)
        check_memory(16 * M * int(loff[-1] + goff[-1]) + 8 * M * self.n_move,
                     f"the block Cholesky factors of method='imex' for {M} samples",
                     "train on fewer samples or use method='euler'")
        self.size, self.loff = size, loff
        self.Lf = np.zeros((M, int(loff[-1])))
        self.Gf = np.zeros((M, int(goff[-1])))
        self.c = None

    def factor(self, S, theta, c):
        """Factor ``I + c L_P`` at the moving stalks ``S[:n_move]`` (pattern) and the weights ``theta``."""
        lay = self.lay
        shared = np.zeros(int(self.loff[-1]))
        dims = lay.dims
        for l in range(1, dims.shape[0] - 1):       # A[a_l, a_l] = (1 + c) I + c W_(l+1)^T W_(l+1)
            n, b = int(dims[l]), 2 * l - 1
            W = theta[lay.woff[l + 1]:lay.woff[l + 1] + int(dims[l + 1]) * n].reshape(int(dims[l + 1]), n)
            block = c * (W.T @ W)
            block[np.diag_indices(n)] += 1.0 + c
            shared[self.loff[b]:self.loff[b + 1]] = block.ravel()
        St = np.ascontiguousarray(S[:self.n_move].T)
        factor_chain(St, theta, lay, float(c), self.out_curv, shared, self.Lf, self.Gf)
        # The solves run over the samples in their inner loops: the factors' samples as columns.
        self.L, self.G = np.ascontiguousarray(self.Lf.T), np.ascontiguousarray(self.Gf.T)
        self.c = float(c)

    def solve(self, R):
        """``(I + c L_P)^-1 R`` for ``R`` of shape ``(n_move, M)`` (a new array)."""
        X = np.array(R, dtype=np.float64, order="C")
        solve_chain(self.L, self.G, self.lay.dims, X)
        return X
