"""Activation regions of the exact heat flow: the watched quantities of a segment and the operators
of ``L_FF``, cached by region (pattern and sliding set).

A region is keyed by the mask of active hidden units and the mask of sliding
units (``z_j`` held at 0).  ``L_FF`` does not depend on the input, so samples
and segments in the same region share one region object.  Up to
``DENSE_MAX_N`` free coordinates a region holds the dense eigendecomposition
of ``L_FF`` (:class:`Region`); above, the sparse operator ``D_F^T D_F`` and an
LU factorisation of its augmented system (:class:`SparseRegion`), for the
``expm_multiply`` path (:mod:`sheaflinalg.dynamics.exact.expm`).  The segments of
both paths (:class:`RegionSegment`) take their region from the cache.
"""

from collections import OrderedDict

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ...kernels.exact.structs import WATCH_P, WATCH_Q, WATCH_Z
# Largest number of coordinates for the dense path (see docs/performance.md, "width scaling").
DENSE_MAX_N = 400


def watch_rows(field, active, sliding, held):
    """Watched quantities ``w = A omega + h >= 0`` of a region: ``A`` (CSR, (n_watch, n)), unit and kind per row.

    ``s_j z_j`` outside sliding (``s_j = +1`` active, ``-1`` inactive); ``p_j`` and
    ``-(p_j + a_j)`` while sliding; hard-pinned ``z_j`` are not watched.
    """
    units = np.flatnonzero(~held[field.z_index] | sliding)
    slide = sliding[units]
    kinds = np.where(slide, WATCH_P, WATCH_Z)
    first = np.cumsum(1 + slide) - 1 - slide             # row of each unit's first watched quantity
    rows, cols, vals = [first[~slide]], [field.z_index[units[~slide]]], [np.where(active[units[~slide]], 1.0, -1.0)]
    Ps = sp.csr_matrix(field.P)[units[slide]].tocoo()
    start = first[slide]
    rows += [start[Ps.row], start[Ps.row] + 1, start + 1]             # p_j, then -(p_j + a_j)
    cols += [Ps.col, Ps.col, field.a_index[units[slide]]]
    vals += [Ps.data, -Ps.data, -np.ones(start.size)]
    n_rows = units.size + int(slide.sum())
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, field.n))
    unit = np.repeat(units, 1 + slide)
    kind = np.repeat(kinds, 1 + slide)
    kind[first[slide] + 1] = WATCH_Q
    return A, unit.astype(np.int64), kind.astype(np.int64)


class _RegionBase:
    """What both kinds of region share: free and held coordinates, ``D_m``, the watched rows."""

    def __init__(self, field, active, sliding, held_pins):
        self.active, self.sliding = active.copy(), sliding.copy()
        held = np.zeros(field.n, dtype=bool)
        held[held_pins] = True
        held[field.z_index[sliding]] = True
        self.free = np.flatnonzero(~held)
        self.held = np.flatnonzero(held)
        self.A_sparse, self.unit, self.kind = watch_rows(field, active, sliding, held)

    def constants(self, p0):
        """``h`` of the watched rows for one sample (``p0``: its weight-force constants)."""
        h = np.zeros(self.unit.size)
        h[self.kind == WATCH_P] = p0[self.unit[self.kind == WATCH_P]]
        h[self.kind == WATCH_Q] = -p0[self.unit[self.kind == WATCH_Q]]
        return h


class Region(_RegionBase):
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
        Watched quantities ``w = A omega + h >= 0`` (:func:`watch_rows`).
    AQ : ndarray
        ``A[:, free] @ Q``.
    unit, kind : ndarray of int
        Hidden unit and kind (``WATCH_Z``, ``WATCH_P``, ``WATCH_Q``) of each watched row.
    """

    def __init__(self, field, active, sliding, held_pins):
        super().__init__(field, active, sliding, held_pins)
        self.D = field.coboundary(active).toarray()
        DF = self.D[:, self.free]
        self.lam, self.Q = np.linalg.eigh(DF.T @ DF)
        self.A = self.A_sparse.toarray()
        self.AQ = self.A[:, self.free] @ self.Q

    def fixed_point(self, omega_held_full, e):
        """Fixed point (full vector) of the region for held values in ``omega_held_full`` and edge term ``e``."""
        rhs = self.D[:, self.free].T @ (self.D[:, self.held] @ omega_held_full[self.held] + e)
        star = omega_held_full.copy()
        star[self.free] = -(self.Q @ ((self.Q.T @ rhs) / self.lam))
        return star


class SparseRegion(_RegionBase):
    """One region's sparse operators, for the ``expm_multiply`` path (no eigenvectors).

    Attributes
    ----------
    D : csr_matrix
        ``D_m`` (edges x free coordinates); ``DF`` its ``F`` columns.
    L : LinearOperator
        ``L_FF = D_F^T D_F`` applied as two sparse products (never formed: one dense
        row of ``D``, as an output edge, would make it dense).
    trace : float
        ``tr L_FF = ||D_F||_F^2``.
    lam_bound : float
        ``||D_F||_1 ||D_F||_inf >= lambda_max(L_FF)``.
    A_free : csr_matrix
        Watched rows on the free coordinates; ``A_norm`` their 2-norms.
    lam : ndarray, shape (1,)
        ``lambda_1(L_FF)`` only (computed on first use, shift-invert ARPACK).
    """

    def __init__(self, field, active, sliding, held_pins):
        super().__init__(field, active, sliding, held_pins)
        self.D = field.coboundary(active)
        self.DF = self.D[:, self.free].tocsr()
        self._DFT = self.DF.T.tocsr()
        self._DP = self.D[:, self.held].tocsr()
        n = self.free.size
        self.L = spla.LinearOperator((n, n), matvec=self.apply, rmatvec=self.apply, matmat=self.apply,
                                     dtype=np.float64)
        self.trace = float(np.sum(self.DF.data ** 2))
        absD = abs(self.DF)
        self.lam_bound = float(absD.sum(axis=0).max() * absD.sum(axis=1).max()) if n else 0.0
        self.A_free = self.A_sparse[:, self.free].tocsr()
        self.A_norm = np.sqrt(np.asarray(self.A_free.multiply(self.A_free).sum(axis=1)).ravel())
        m = self.DF.shape[0]
        # Least squares min ||D_F x + g|| through its augmented system (no normal equations, no fill
        # from dense rows): [[I, D_F], [D_F^T, 0]] [y; x] = [-g; 0].
        K = sp.bmat([[sp.identity(m), self.DF], [self._DFT, None]], format="csc")
        self._lu = spla.splu(K) if n else None
        self._lam = None

    def apply(self, v):
        """``L_FF v`` (``v`` a vector or a matrix of columns)."""
        return self._DFT @ (self.DF @ v)

    def solve_normal(self, b):
        """``L_FF^{-1} b`` through the augmented system."""
        m = self.DF.shape[0]
        rhs = np.concatenate([np.zeros(m), b])
        return -self._lu.solve(rhs)[m:]

    def fixed_point(self, omega_held_full, e):
        """Fixed point (full vector) of the region for held values in ``omega_held_full`` and edge term ``e``."""
        star = omega_held_full.copy()
        if not self.free.size:
            return star
        g = self._DP @ omega_held_full[self.held] + e
        m = self.DF.shape[0]
        star[self.free] = self._lu.solve(np.concatenate([-g, np.zeros(self.free.size)]))[m:]
        return star

    @property
    def lam(self):
        if self._lam is None:
            self._lam = self._smallest_eigenvalue()
        return self._lam

    def _smallest_eigenvalue(self):
        n = self.free.size
        if n <= 2:
            return np.linalg.eigvalsh(self.apply(np.eye(n)))[:1]
        inv = spla.LinearOperator((n, n), matvec=self.solve_normal, dtype=np.float64)
        val = spla.eigsh(self.L, k=1, sigma=0.0, which="LM", OPinv=inv, v0=np.ones(n), tol=1e-14,
                         return_eigenvectors=False)
        return np.array([float(val[0])])


class RegionCache:
    """Least-recently-used cache of regions (``hits``/``misses`` counted).

    :class:`Region` up to ``dense_max`` free coordinates (default ``DENSE_MAX_N``),
    :class:`SparseRegion` above.  Regions evicted for memory are rebuilt on demand,
    identically (same matrices, same LAPACK / SuperLU calls).
    """

    def __init__(self, field, held_pins, max_bytes=256 << 20, dense_max=None):
        self.field, self.held_pins = field, held_pins
        self.dense_max = DENSE_MAX_N if dense_max is None else int(dense_max)
        self.kind = Region if field.n <= self.dense_max else SparseRegion
        if self.kind is Region:
            per = 8 * (3 * field.n * field.n + field.D0.shape[0] * field.n)
        else:
            per = 8 * (30 * field.D0.nnz + 10 * field.n)
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
        region = self.kind(self.field, active, sliding, self.held_pins)
        self._store[key] = region
        if len(self._store) > self.max_entries:
            self._store.popitem(last=False)
        return key, region

    def by_key(self, key, active, sliding):
        """The region of ``key`` (rebuilt if evicted; not counted)."""
        region = self._store.get(key)
        return region if region is not None else self.kind(self.field, active, sliding, self.held_pins)


class RegionSegment:
    """One piece of a sample's trajectory on the Python path: ``[start, end]`` in one region (``key`` in ``cache``).

    Subclasses (:class:`~.dense.Segment`, :class:`~.expm.ExpmSegment`) give ``state(region, t)``,
    ``first_step(region)``, ``convergence_time(region, tol, limit)`` and ``sums(region, c)``.
    """

    __slots__ = ("sample", "start", "end", "key", "active", "sliding", "star", "beta", "alpha", "cache")

    def __init__(self, sample, start, key, region, star, beta, alpha, cache=None):
        self.sample, self.start, self.end, self.key = sample, start, start, key
        self.active, self.sliding = region.active, region.sliding
        self.star, self.beta, self.alpha, self.cache = star, beta, alpha, cache

    def __repr__(self):
        return (f"{type(self).__name__}(sample={self.sample}, start={self.start:.6g}, end={self.end:.6g}, "
                f"active={int(self.active.sum())}, sliding={int(self.sliding.sum())})")

    def states(self, t):
        """Full states at times ``t`` (1-D array), shape (n_t, n); the region is taken from the cache."""
        return self.state(self.cache.by_key(self.key, self.active, self.sliding), t)
