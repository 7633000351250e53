"""The dense path of the exact flow: a region's ``L_FF = Q diag(lam) Q^T``, segments in closed form.

``omega(t) = omega* + Q (exp(-alpha lam (t - start)) * beta)`` on the free
coordinates (the decomposition is the region's, :class:`~.regions.Region`).  Its
watched quantities are sums of decaying exponentials: the event scan and the
time to ``tol`` are the compiled ones of :mod:`sheaflinalg.kernels.exact`.
"""

import numpy as np

from ...kernels.exact import scan as _scan
from .regions import RegionSegment

ROUNDOFF = 8 * np.finfo(float).eps


def merge_equal_rates(C, mu):
    """``(C, mu)`` with the terms of equal rates (to round-off) added into one.

    A repeated eigenvalue gives terms that may cancel exactly (``0.55 e^{-t} - 0.55 e^{-t}``);
    bounded term by term, such a sum of zero never clears an interval and the scan would cut
    every interval down to its smallest width.  Rates within ``8 eps max(mu)`` of the first of
    their group take its value: the change of ``w`` is below the round-off of :class:`DenseSums`.

    Examples
    --------
    >>> C, mu = merge_equal_rates(np.array([[0.55, -0.55, 1.0]]), np.array([1.0, 1.0, 2.0]))
    >>> C.tolist(), mu.tolist()
    ([[0.0, 1.0]], [1.0, 2.0])
    """
    if mu.size < 2:
        return C, mu
    order = np.argsort(mu, kind="stable")
    sorted_mu = mu[order]
    new_group = np.ones(mu.size, dtype=bool)
    tol = ROUNDOFF * sorted_mu[-1]
    start = sorted_mu[0]
    for i in range(1, mu.size):          # a group's rates all lie within tol of its first
        new_group[i] = sorted_mu[i] - start > tol
        start = sorted_mu[i] if new_group[i] else start
    if new_group.all():
        return C, mu
    group = np.cumsum(new_group) - 1
    merged = np.zeros((C.shape[0], int(group[-1]) + 1))
    np.add.at(merged.T, group, C[:, order].T)
    return merged, sorted_mu[new_group]


class DenseSums:
    """Watched quantities ``w_j(t) = c_j + sum_k C_jk exp(-mu_k t)`` of a dense segment.

    ``roundoff``: ``8 eps (|c_j| + sum_k |C_jk|)``; values within it of 0 count as 0 (not as an event).
    """

    def __init__(self, c, C, mu):
        self.roundoff = ROUNDOFF * (np.abs(c) + np.abs(C).sum(axis=1))
        self.c = np.ascontiguousarray(c, dtype=np.float64)
        C, mu = merge_equal_rates(C, mu)
        self.C, self.mu = np.ascontiguousarray(C, dtype=np.float64), np.ascontiguousarray(mu, dtype=np.float64)

    def first_event(self, horizon, h0):
        """First time in ``(0, horizon]`` some ``w_j`` goes below its round-off: ``(t, j)`` or None
        (:func:`sheaflinalg.kernels.exact.scan.first_event`)."""
        nw = self.c.size
        t, j = _scan.first_event(self.c, self.C, self.roundoff, self.mu, nw, float(horizon), float(h0),
                                 _scan.scan_workspace(nw))
        return None if j < 0 else (float(t), int(j))


class Segment(RegionSegment):
    """A dense segment: ``omega(t) = star + Q (exp(-alpha lam (t - start)) * beta)`` on the free coordinates."""

    __slots__ = ()

    def state(self, region, t):
        """States at times ``t`` (1-D array), shape (n_t, n)."""
        E = np.exp(-self.alpha * np.outer(np.asarray(t) - self.start, region.lam))
        out = np.repeat(self.star[None, :], E.shape[0], axis=0)
        out[:, region.free] += (E * self.beta) @ region.Q.T
        return out

    def first_step(self, region):
        mu = self.alpha * region.lam
        return 0.25 / mu.max() if mu.size else 1.0

    def convergence_time(self, region, tol, limit):
        """Time to come within ``tol`` of the fixed point
        (:func:`sheaflinalg.kernels.exact.scan.convergence_time`)."""
        if not self.beta.size:
            return 0.0
        return float(_scan.convergence_time(np.ascontiguousarray(self.beta), self.alpha * region.lam, float(tol)))

    def sums(self, region, c):
        return DenseSums(c, region.AQ * self.beta, self.alpha * region.lam)
