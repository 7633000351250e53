"""Activation regions of the exact heat flow: the watched quantities of a segment and the
eigendecompositions of ``L_FF``, cached by region (pattern and sliding set).

A region is keyed by the mask of active hidden units and the mask of sliding
units (``z_j`` held at 0).  ``L_FF`` does not depend on the input, so samples
and segments in the same region share one decomposition.
"""

from collections import OrderedDict

import numpy as np

WATCH_Z, WATCH_P, WATCH_Q = 0, 1, 2


class Region:
    """One region's decomposition ``L_FF = Q diag(lam) Q^T`` and its watched quantities.

    Attributes
    ----------
    free : ndarray of int
        Coordinates that move (``F``); ``held`` the others (hard pins, sliding ``z_j``).
    Q, lam : ndarray
        Eigenvectors and eigenvalues of ``L_FF`` (ascending, all > 0).
    D : ndarray
        Dense ``D_m`` (edges x free coordinates).
    A : ndarray, shape (n_watch, n)
        Watched quantities ``w = A omega + h >= 0``: ``s_j z_j`` outside sliding,
        ``p_j`` and ``-(p_j + a_j)`` while sliding.
    AQ : ndarray
        ``A[:, free] @ Q``.
    unit, kind : ndarray of int
        Hidden unit and kind (``WATCH_Z``, ``WATCH_P``, ``WATCH_Q``) of each watched row.
    """

    def __init__(self, field, active, sliding, held_pins):
        self.active, self.sliding = active.copy(), sliding.copy()
        n = field.n
        held = np.zeros(n, dtype=bool)
        held[held_pins] = True
        held[field.z_index[sliding]] = True
        self.free = np.flatnonzero(~held)
        self.held = np.flatnonzero(held)
        self.D = field.coboundary(active).toarray()
        DF = self.D[:, self.free]
        self.lam, self.Q = np.linalg.eigh(DF.T @ DF)
        self.A, self.unit, self.kind = self._watch(field, active, sliding, held)
        self.AQ = self.A[:, self.free] @ self.Q

    @staticmethod
    def _watch(field, active, sliding, held):
        P = field.P_dense
        rows, units, kinds = [], [], []
        for u in np.flatnonzero(~held[field.z_index] | sliding):
            if sliding[u]:
                q = P[u].copy()
                q[field.a_index[u]] += 1.0
                rows += [P[u], -q]
                units += [u, u]
                kinds += [WATCH_P, WATCH_Q]
            else:
                r = np.zeros(field.n)
                r[field.z_index[u]] = 1.0 if active[u] else -1.0
                rows.append(r)
                units.append(u)
                kinds.append(WATCH_Z)
        A = np.array(rows).reshape(len(rows), field.n)
        return A, np.array(units, dtype=np.int64), np.array(kinds, dtype=np.int64)

    def constants(self, p0):
        """``h`` of the watched rows for one sample (``p0``: its weight-force constants)."""
        h = np.zeros(self.unit.size)
        h[self.kind == WATCH_P] = p0[self.unit[self.kind == WATCH_P]]
        h[self.kind == WATCH_Q] = -p0[self.unit[self.kind == WATCH_Q]]
        return h

    def fixed_point(self, omega_held_full, e):
        """Fixed point (full vector) of the region for held values in ``omega_held_full`` and edge term ``e``."""
        rhs = self.D[:, self.free].T @ (self.D[:, self.held] @ omega_held_full[self.held] + e)
        star = omega_held_full.copy()
        star[self.free] = -(self.Q @ ((self.Q.T @ rhs) / self.lam))
        return star


class RegionCache:
    """Least-recently-used cache of :class:`Region` objects (``hits``/``misses`` counted).

    Regions evicted for memory are rebuilt on demand, identically (same matrix, same LAPACK call).
    """

    def __init__(self, field, held_pins, max_bytes=256 << 20):
        self.field, self.held_pins = field, held_pins
        per = 8 * (3 * field.n * field.n + field.D0.shape[0] * field.n)
        self.max_entries = max(16, int(max_bytes // max(per, 1)))
        self._store = OrderedDict()
        self.hits = self.misses = 0

    def get(self, active, sliding):
        key = (np.packbits(active).tobytes(), np.packbits(sliding).tobytes())
        region = self._store.get(key)
        if region is not None:
            self.hits += 1
            self._store.move_to_end(key)
            return key, region
        self.misses += 1
        region = Region(self.field, active, sliding, self.held_pins)
        self._store[key] = region
        if len(self._store) > self.max_entries:
            self._store.popitem(last=False)
        return key, region

    def by_key(self, key, active, sliding):
        """The region of ``key`` (rebuilt if evicted; not counted)."""
        region = self._store.get(key)
        return region if region is not None else Region(self.field, active, sliding, self.held_pins)
