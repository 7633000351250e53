"""Max-pool windows whose entries are held equal (a Filippov sliding mode of a max-pool switching surface):
whether a held group slides.

Overlapping windows (a stride below the kernel) share entries: two sliding windows that share one hold the
union of their entries equal, and each window's pull ``e_w`` (its edge residual, on its selected entry) is
spread over its own entries of the group with convex weights.  :func:`group_slides` decides whether such
weights exist: with ``F`` the force on every entry of the group without the windows' pulls,
``F_j + sum_w a_wj e_w`` must be one value over the group (a linear feasibility problem; one window: the
closed form of :func:`~sheaflinalg.sheaf.matrix_free.switching.on_switching_surface`'s release).
"""

import numpy as np
from scipy.optimize import linprog

def window_entries(node, graph, w):
    """The parent's entries (flat) of window ``w`` of the max-pool ``node``."""
    _, n_in, index, _ = node.rule.windows(node, graph)
    c, p = divmod(int(w), index.shape[0])
    return c * n_in + index[p][index[p] >= 0]


def group_slides(F, pulls, members, tol):
    """``(slides, short)``: whether a group of entries held equal slides, convex weights ``a_w`` over each
    window's members with ``F_j + sum_w a_wj pulls[w]`` one value ``c`` over the group (within ``tol`` per
    entry), and the entries that the closest weights leave off by more than ``tol`` (the windows' pulls do not
    reach them: they belong to another level).

    Parameters
    ----------
    F : ndarray, shape (n,)
        The force on each entry of the group without the windows' pulls.
    pulls : ndarray, shape (W,)
        Each window's edge residual ``e_w`` (its pull on its selected entry).
    members : ndarray of bool, shape (W, n)
        The group's entries in each window.
    tol : float

    Examples
    --------
    >>> F = np.array([1.0, 1.0, 1.0])               # two windows pulling the shared middle entry down
    >>> group_slides(F, np.array([-1.5, -1.5]), np.array([[1, 1, 0], [0, 1, 1]], bool), 1e-9)[0]
    True
    >>> group_slides(F, np.array([0.5]), np.array([[1, 1, 1]], bool), 1e-9)[0]   # a pull up: no sliding
    False
    """
    W, n = members.shape
    if np.any(pulls > tol):         # a window pulling its entry up: that entry leaves the tie alone
        return False, np.zeros(n, dtype=bool)
    cols = np.argwhere(members)                          # (window, entry) of every weight
    k = cols.shape[0]
    # unknowns: the weights (k), c, and slacks above and below per entry (2 n)
    A_eq = np.zeros((n + W, k + 1 + 2 * n))
    A_eq[cols[:, 1], np.arange(k)] = pulls[cols[:, 0]]
    A_eq[:n, k] = -1.0
    A_eq[np.arange(n), k + 1 + np.arange(n)] = 1.0
    A_eq[np.arange(n), k + 1 + n + np.arange(n)] = -1.0
    A_eq[n + cols[:, 0], np.arange(k)] = 1.0
    b_eq = np.concatenate([-F, np.ones(W)])
    cost = np.concatenate([np.zeros(k + 1), np.ones(2 * n)])
    bounds = [(0, None)] * k + [(None, None)] + [(0, None)] * (2 * n)
    result = linprog(cost, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if result.status != 0:
        return False, np.ones(n, dtype=bool)
    short = result.x[k + 1:k + 1 + n] + result.x[k + 1 + n:] > tol
    return not short.any(), short
