"""Hildreth's sweeps of the window levels' dual (numba): :func:`~sheaflinalg.sheaf.matrix_free.window_levels.swept_levels`.

One exact coordinate step per membership ``(window, entry)`` of the problem
``sum_j weight_j (a_j - rest_j)^2 / 2 + sum_w stiffness (t_w - target_w)^2 / 2``
subject to ``a_j <= t_w``, the memberships taken class by class (a class has
distinct windows and distinct entries, so its steps are independent: taken one
after the other they are the same numbers as taken at once).
"""

from numba import njit


@njit(cache=True)
def hildreth_sweeps(members, a, t, mu, sweeps, scale):
    """Sweep the :class:`~sheaflinalg.kernels.structs.Memberships` ``members`` until no constraint is violated by
    more than ``scale`` and no multiplier is positive on a constraint slack by more (``a``, ``t``, ``mu`` updated
    in place), at most ``sweeps`` times; whether it converged."""
    rows, entries, order, weight = members.rows, members.entries, members.order, members.weight
    for _ in range(sweeps):
        for i in order:
            w, j = rows[i], entries[i]
            new = max(0.0, mu[i] + (a[j] - t[w]) / members.inverse[i])
            change = new - mu[i]
            mu[i] = new
            a[j] -= change / weight[j]
            t[w] += change / members.stiffness
        converged = True
        for i in range(rows.shape[0]):
            gap = t[rows[i]] - a[entries[i]]
            if gap < -scale or (mu[i] != 0.0 and gap > scale):
                converged = False
                break
        if converged:
            return True
    return False
