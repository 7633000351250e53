"""The naive dense augmented coboundary of one sample: hard pins, soft-pin and reluctance edges,
freed inputs (eq. pinning-maps, appendix C.2), built from ``naive.sheaf``'s dense coboundary."""

import numpy as np


def naive_augmented(ref, x, hard_pos, hard_vals, soft_pos, soft_vals, soft_gamma, lam, anchor,
                    free_inputs=()):
    """Dense augmented coboundary of one sample.

    ``ref`` comes from ``naive.sheaf``; positions are indices in the free order
    (= order of the free coordinates along the path); ``anchor`` is indexed by
    free-order position.  Returns (D_free, D_bnd, u, offset, free_full_positions).
    """
    D, free = ref["delta"], ref["free"]
    n_edges, n_full = D.shape
    free_full = np.flatnonzero(free)                 # free-order position -> full column
    values = np.zeros(n_full)
    values[~free] = ref["u"]
    values[free_full[hard_pos]] = hard_vals
    is_free = free.copy()
    is_free[free_full[hard_pos]] = False
    is_free[np.asarray(free_inputs, dtype=int)] = True   # x occupies the first n_0 columns
    omega_cols = np.flatnonzero(is_free)
    n_soft, n_rel = len(soft_pos), (len(omega_cols) if lam > 0 else 0)
    big = np.zeros((n_edges + n_soft + n_rel, n_full + n_soft + n_rel))
    big[:n_edges, :n_full] = D
    vals = np.concatenate([values, soft_vals, np.zeros(n_rel)])
    for i, (p, g) in enumerate(zip(soft_pos, soft_gamma)):
        big[n_edges + i, free_full[p]] = np.sqrt(g)
        big[n_edges + i, n_full + i] = -np.sqrt(g)
    for i, c in enumerate(omega_cols[:n_rel]):
        big[n_edges + n_soft + i, c] = np.sqrt(lam)
        big[n_edges + n_soft + i, n_full + n_soft + i] = -np.sqrt(lam)
        pos = np.flatnonzero(free_full == c)
        vals[n_full + n_soft + i] = anchor[pos[0]] if pos.size else 0.0
    cols_free = np.zeros(big.shape[1], dtype=bool)
    cols_free[omega_cols] = True
    offset = np.concatenate([ref["edge_offset"], np.zeros(n_soft + n_rel)])
    return big[:, cols_free], big[:, ~cols_free], vals[~cols_free], offset, omega_cols
