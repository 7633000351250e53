"""Spectral diagnostics of the restricted Laplacian ``L[Omega, Omega]`` (paper section 6.3, appendix E.3).

Per sample (each with its own activation pattern) :func:`spectrum` computes
``lambda_min`` (the paper's spectral gap ``lambda_1``), ``lambda_max``, the
condition number, optionally the ``k`` smallest / largest eigenpairs, and
from the eigenvectors the energy per block, per-neuron contributions and the
stability of the eigenvectors across samples.

Methods (``method="auto"`` picks the first that applies):

* ``"dense"``: small systems (``N <= dense_max``) are assembled as dense
  ``N x N`` matrices and diagonalised in one batched ``numpy.linalg.eigh``.
* ``"arpack"``: ARPACK (SciPy's, as in ``scipy.sparse.linalg.eigsh``) on
  linear operators, never an ``N x N`` matrix.  ``lambda_max``: Lanczos on
  ``v -> delta^T (delta v)``.  ``lambda_min``: Lanczos on
  ``L^{-1} = delta^{-1} delta^{-T}`` (shift-invert at 0), one block backward
  and one block forward substitution with the pattern's masks
  (:mod:`sheaflinalg.kernels.substitution`): no factorisation.  The two
  Lanczos runs advance in lockstep (:mod:`sheaflinalg.arpack_pair`), so that
  one kernel call serves both at every step
  (:meth:`CoboundaryOperator.apply_pair`).
* Systems whose ``delta_Omega`` is not square (pins, soft pins, reluctance
  edges; see :func:`spectrum_of_system`) use a sparse Cholesky factor of
  ``L[Omega, Omega]`` (:func:`sheaflinalg.factor.cholesky`: CHOLMOD, SuperLU
  fallback) for the shift-invert.
"""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba
import numpy as np
import scipy.sparse as sp
from numba.typed import List
import scipy.sparse.linalg as spla

from .assembly import normalise_pattern, output_jacobian
from .arpack_pair import ArpackNotConverged, largest_pair
from .harmonic import harmonic_extension
from .kernels import substitution as _sub
from .layout import Layout
from .validation import as_samples, check_choice, check_positive

SYSTEMS = ("reduced", "free")
METHODS = ("auto", "dense", "arpack")
SOLVERS = ("auto", "substitution", "cholmod", "superlu")
DENSE_MAX = 200
# Default ARPACK tolerance on the relative Ritz residuals.  The eigenvalue error
# is of the order of the squared residual over the spectral gap, so 1e-8 gives
# eigenvalues far below 1e-9 relative (the tests check 1e-9 against dense eigh)
# for about 20% fewer operator applications than 1e-10.  The achieved residuals
# of ``L`` are reported in ``SpectrumResult.residuals``; for the smallest
# eigenpairs (Lanczos on ``L^{-1}``) that residual can exceed ``tol`` by up to
# the condition number.
TOL = 1e-8
# Networks with this many weights use the two-thread operator kernels by default
# (which split only matrices of at least ``kernels.substitution.PARALLEL_MIN``
# entries); dense batches with M * N**3 above THREADS_MIN_DENSE are split over two threads.
THREADS_MIN_WEIGHTS = 100_000
THREADS_MIN_DENSE = 2_000_000
# numba's fallback threading layer (workqueue, when neither OpenMP nor TBB is
# installed) aborts if two parallel kernels run at once: spectra computed from
# several Python threads take turns in the two-thread kernel.
_PARALLEL_LOCK = threading.Lock()
# GNU OpenMP cannot start threads in a child forked from a process whose
# OpenMP threads already ran (numba then kills the child): such a child uses
# the serial kernels, which give the same results.
_PARALLEL_FORBIDDEN = False


def _after_fork_in_child():
    global _PARALLEL_FORBIDDEN
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran before the fork
        return
    _PARALLEL_FORBIDDEN = layer == "omp"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class SpectrumConvergenceError(RuntimeError):
    """ARPACK did not reach the requested tolerance.

    Attributes
    ----------
    sample : int
        Index of the sample whose eigenproblem failed.
    which : {"smallest", "largest"}
    residual : float
        Relative residual reached (of ``L`` for the largest eigenvalues, of
        ``L^{-1}`` for the smallest), estimated from a Lanczos space of the
        size ARPACK was allowed (SciPy does not expose ARPACK's own estimates).
    tol : float
    """

    def __init__(self, message, sample, which, residual, tol):
        super().__init__(message)
        self.sample, self.which, self.residual, self.tol = sample, which, residual, tol


# ---------------------------------------------------------------- operators
class CoboundaryOperator:
    """``delta_Omega`` of one sample as products and substitutions (no matrix).

    Parameters
    ----------
    net : Network
    mask : sequence of ndarray
        This sample's hidden-layer masks (``True`` = active).
    jacobian : ndarray or None
        Linearised output map ``J`` (1-D diagonal or 2-D); ``None`` for the
        reduced system.
    weights : numba.typed.List, optional
        :func:`typed_weights` of ``net``, when the caller already has them.
    threads : {1, 2}
        Threads of the kernels (see :meth:`apply_pair`).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> op = CoboundaryOperator(net, net.activation_pattern(np.array([1.0, 0.5])))
    >>> v = np.arange(op.n, dtype=float)
    >>> bool(np.allclose(op.laplacian_solve(op.laplacian_matvec(v)), v))
    True
    """

    def __init__(self, net, mask, jacobian=None, weights=None, threads=1):
        reduced = jacobian is None
        self.threads = threads
        self.layout = Layout(net.dims, reduced=reduced)
        off = self.layout.kernel_offsets()
        self.n = self.layout.n_free
        self._dims, self._zoff, self._aoff = off["dims"], off["zoff"], off["aoff"]
        self._yhat = off["yhat_off"]
        self._weights = typed_weights(net) if weights is None else weights
        m = np.zeros(self.n)
        for l, ml in enumerate(mask, start=1):
            m[self.layout.free(f"z{l}")] = ml
        self._mask = m
        n_out = net.dims[-1]
        if jacobian is None:
            J = np.zeros((n_out, n_out))
        else:
            J = np.asarray(jacobian, dtype=np.float64)
            J = np.diag(J) if J.ndim == 1 else np.ascontiguousarray(J)
        self._J = J
        self._width = max(net.dims[1:-1], default=1)
        #: Weight matrices with fewer entries run on one thread even with ``threads=2``.
        self.parallel_min = _sub.PARALLEL_MIN
        self.n_matvec = 0
        self.n_solve = 0
        self._count_lock = threading.Lock()

    def _args(self):
        return (self._weights, self._dims, self._zoff, self._aoff, self._mask, self._J, self._yhat)

    def _count(self, name):
        with self._count_lock:
            setattr(self, name, getattr(self, name) + 1)

    def apply_pair(self, a, b):
        """``y = L x`` for request ``a = (x, y)`` and ``y = L^{-1} x`` for request ``b``.

        Either request may be ``None`` (skipped); the two share their passes
        over the weights (the protocol of
        :func:`sheaflinalg.arpack_pair.largest_pair`).  Every ``x`` and ``y``
        is a contiguous float64 vector of length ``n``.  With ``threads=2``
        the rows of every big weight matrix are split over two threads; the
        results are the same bit for bit (see
        :mod:`sheaflinalg.kernels.substitution`).
        """
        empty = np.empty(0)
        v, Lv = self._request(a, "n_matvec") if a is not None else (empty, empty)
        w, Linv = self._request(b, "n_solve") if b is not None else (empty, empty)
        # fresh scratch per call (cheap): the operator may be used from several threads
        dv, y = np.empty(self.n), np.empty(self.n)
        if self.threads > 1 and not _PARALLEL_FORBIDDEN:
            with _PARALLEL_LOCK:
                self._sweeps(_sub.backward_sweep_parallel, _sub.forward_sweep_parallel, v, Lv, dv, w, Linv, y)
        else:
            self._sweeps(_sub.backward_sweep, _sub.forward_sweep, v, Lv, dv, w, Linv, y)

    def _request(self, request, counter):
        # the kernels do not check bounds: a wrong vector must not reach them
        x, y = request
        for arr in (x, y):
            if not (isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.shape == (self.n,)
                    and arr.flags.c_contiguous):
                raise ValueError(f"apply_pair needs contiguous float64 vectors of length {self.n}")
        if not y.flags.writeable:
            raise ValueError("apply_pair: the output vector is read-only")
        self._count(counter)
        return x, y

    def _sweeps(self, backward, forward, v, Lv, dv, w, Linv, y):
        """The backward sweep (``L v``, ``y = delta^{-T} w``), then ``Linv = delta^{-1} y``."""
        P, Q = np.empty((2, self._width)), np.empty((2, self._width))
        backward(*self._args(), v, Lv, dv, w, y, P, Q, self.parallel_min)
        if w.size:
            forward(*self._args(), y, Linv, self.parallel_min)

    def _vector(self, v):
        v = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
        if v.size != self.n:
            raise ValueError(f"expected a vector of length {self.n}, got {v.size}")
        return v

    def laplacian_matvec(self, v):
        """``delta^T (delta v)``."""
        out = np.empty(self.n)
        self.apply_pair((self._vector(v), out), None)
        return out

    def laplacian_solve(self, v):
        """``L^{-1} v = delta^{-1} (delta^{-T} v)`` (two block substitutions)."""
        out = np.empty(self.n)
        self.apply_pair(None, (self._vector(v), out))
        return out

    def solve(self, w):
        """``delta^{-1} w`` (block forward substitution)."""
        out = np.empty(self.n)
        _sub.forward_sweep(*self._args(), self._vector(w), out, self.parallel_min)
        return out

    def solve_transpose(self, v):
        """``delta^{-T} v`` (block backward substitution)."""
        out, empty = np.empty(self.n), np.empty(0)
        P, Q = np.empty((2, self._width)), np.empty((2, self._width))
        _sub.backward_sweep(*self._args(), empty, empty, empty, self._vector(v), out, P, Q, self.parallel_min)
        return out


def typed_weights(net):
    """The network's weight matrices as a ``numba.typed.List`` (views, no copy)."""
    return List([np.ascontiguousarray(W) for W in net.weights])


# ------------------------------------------------------------------ result
def _stats(values):
    v = np.asarray(values, dtype=np.float64)
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "iqr": float(q75 - q25),
            "mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max())}


@dataclass
class SpectrumResult:
    """Result of :func:`spectrum`: per-sample extreme eigenpairs of ``L[Omega, Omega]``.

    Attributes
    ----------
    smallest : ndarray, shape (n_samples, k)
        The ``k`` smallest eigenvalues, ascending (``smallest[:, 0]`` is ``lambda_1``).
    largest : ndarray, shape (n_samples, k)
        The ``k`` largest eigenvalues, descending.
    vectors_smallest, vectors_largest : ndarray, shape (n_samples, k, N) or None
        Unit eigenvectors (free order of :attr:`layout`), signed so that the
        entry of largest magnitude is positive.
    eigenvalues : ndarray, shape (n_samples, N) or None
        The whole spectrum, ascending (``full=True``, dense method only).
    residuals : ndarray, shape (n_samples, 2)
        Largest relative residual ``||L v - lambda v|| / lambda`` of the
        smallest / largest eigenpairs (zeros when ``vectors=False`` on the
        dense path).
    layout : Layout or None
        Block layout of the eigenvectors (``None`` for a generic system).
    blocks : list of (str, slice or index array)
        Named blocks the energies are reported on (for a pinned system, the
        layout's blocks without the pinned coordinates).
    method : str
        ``"dense"``, ``"arpack"`` (substitution), ``"cholmod"`` or ``"superlu"``.
    system : str
    n_operator : int
        Operator applications used by ARPACK, summed over the samples.
    n_distinct : int
        Number of distinct Laplacians diagonalised: samples with the same
        activation pattern share ``L[Omega, Omega]`` (reduced system, or any
        system with identity output), which is computed once.
    """

    smallest: np.ndarray
    largest: np.ndarray
    vectors_smallest: np.ndarray = None
    vectors_largest: np.ndarray = None
    eigenvalues: np.ndarray = None
    residuals: np.ndarray = None
    layout: Layout = None
    blocks: list = field(default_factory=list)
    method: str = ""
    system: str = "reduced"
    n_operator: int = 0
    n_distinct: int = 0

    @property
    def lambda_min(self):
        """Smallest eigenvalue ``lambda_1`` per sample (the spectral gap)."""
        return self.smallest[:, 0]

    @property
    def lambda_max(self):
        """Largest eigenvalue per sample."""
        return self.largest[:, 0]

    @property
    def condition(self):
        """Condition number ``lambda_max / lambda_min`` per sample."""
        return self.lambda_max / self.lambda_min

    @property
    def n_samples(self):
        return self.smallest.shape[0]

    @property
    def block_names(self):
        """Names of the blocks of :meth:`block_energy` (``z1, a1, ..., z(k+1)[, yhat]``)."""
        return [name for name, _ in self.blocks]

    def _vectors(self, which, index):
        check_choice(which, ("smallest", "largest"), "which")
        V = self.vectors_smallest if which == "smallest" else self.vectors_largest
        if V is None:
            raise ValueError("eigenvectors were not computed: call spectrum(..., vectors=True)")
        if not 0 <= index < V.shape[1]:
            raise ValueError(f"index {index} out of range: {V.shape[1]} eigenvectors were computed")
        return V[:, index, :]

    def block_energy(self, which="smallest", index=0):
        """Energy ``||v_b||^2`` of eigenvector ``index`` on every block, per sample.

        Returns
        -------
        ndarray, shape (n_samples, n_blocks)
            Rows sum to 1 (unit eigenvectors); columns follow :attr:`block_names`.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> sp = sl.spectrum(sl.Network.random([2, 6, 1], seed=0), np.ones((3, 2)))
        >>> np.round(sp.block_energy().sum(axis=1), 12)
        array([1., 1., 1.])
        """
        V = self._vectors(which, index)
        return np.stack([np.sum(V[:, s] ** 2, axis=1) for _, s in self.blocks], axis=1)

    def dominant_block(self, which="smallest", index=0):
        """Name of the block with the largest mean energy over the samples."""
        return self.block_names[int(np.argmax(self.block_energy(which, index).mean(axis=0)))]

    def neuron_contributions(self, which="smallest", index=0, block=None):
        """Share of each neuron of ``block`` (default: the dominant block) in the block's energy.

        Returns
        -------
        name : str
        ndarray, shape (n_samples, block size)
            ``v_j^2 / ||v_block||^2``; rows sum to 1 (0 where the block has no energy).
        """
        V = self._vectors(which, index)
        name = self.dominant_block(which, index) if block is None else block
        table = dict(self.blocks)
        if name not in table:
            raise ValueError(f"no block {name!r}; available: {', '.join(table)}")
        part = V[:, table[name]] ** 2
        total = part.sum(axis=1, keepdims=True)
        return name, np.divide(part, total, out=np.zeros_like(part), where=total > 0)

    def stability(self, which="smallest", index=0):
        """Mean ``|cos|`` between the eigenvectors of every pair of distinct samples (1.0 for one sample)."""
        V = self._vectors(which, index)
        if V.shape[0] < 2:
            return 1.0
        C = np.abs(V @ V.T)
        m = V.shape[0]
        return float((C.sum() - np.trace(C)) / (m * (m - 1)))

    def summary(self):
        """Statistics over the samples: ``{quantity: {median, q25, q75, iqr, mean, std, min, max}}``."""
        return {"lambda_min": _stats(self.lambda_min), "lambda_max": _stats(self.lambda_max),
                "condition": _stats(self.condition)}

    def table(self):
        """A plain-text table of :meth:`summary` (and the eigenvector diagnostics when available)."""
        lines = [f"{'quantity':<12}{'median':>12}{'q25':>12}{'q75':>12}{'std':>12}{'min':>12}{'max':>12}"]
        for name, st in self.summary().items():
            lines.append(f"{name:<12}" + "".join(f"{st[c]:>12.5g}" for c in
                                                 ("median", "q25", "q75", "std", "min", "max")))
        if self.vectors_smallest is not None:
            lines.append("")
            lines.append(f"{'energy':<12}" + "".join(f"{b:>9}" for b in self.block_names))
            for which, label in (("smallest", "lambda_min"), ("largest", "lambda_max")):
                E = self.block_energy(which).mean(axis=0)
                lines.append(f"{label:<12}" + "".join(f"{e:>9.3f}" for e in E))
            lines.append("")
            lines.append(f"eigenvector stability (mean |cos| over sample pairs): "
                         f"lambda_min {self.stability('smallest'):.4f}, "
                         f"lambda_max {self.stability('largest'):.4f}")
        return "\n".join(lines)

    def __repr__(self):
        s = self.summary()
        return (f"SpectrumResult(n_samples={self.n_samples}, method={self.method!r}, "
                f"lambda_min median={s['lambda_min']['median']:.4g}, "
                f"lambda_max median={s['lambda_max']['median']:.4g}, "
                f"condition median={s['condition']['median']:.4g})")


# ------------------------------------------------------------------ helpers
def _augmented_blocks(layout, layout_free_index):
    """Blocks of an augmented system's free coordinates: the layout's blocks minus hard
    pins (as index arrays), and ``"x"`` for freed inputs."""
    blocks = []
    freed = np.flatnonzero(layout_free_index < 0)
    if freed.size:
        blocks.append(("x", freed))
    for b in layout.free_blocks:
        idx = np.flatnonzero((layout_free_index >= b.offset) & (layout_free_index < b.offset + b.size))
        if idx.size:
            blocks.append((b.name, idx))
    return blocks


def _distinct_patterns(masks, M):
    """``(first, inverse)``: one representative sample per distinct pattern, and each sample's pattern."""
    if M == 1:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    keys = np.packbits(np.concatenate([m.reshape(M, -1) for m in masks] + [np.ones((M, 1), bool)], axis=1),
                       axis=1)
    keys = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _choose_method(method, full, N, k, dense_max):
    """``"dense"`` or ``"arpack"`` for ``method`` (``"auto"``: dense up to ``dense_max``), or a clear error."""
    if full and method == "arpack":
        raise ValueError("full=True needs the dense method (method='dense' or 'auto')")
    if method == "auto":
        method = "dense" if (N <= dense_max or full) else "arpack"
    if method == "arpack" and k >= N:
        raise ValueError(f"k={k} is too large for ARPACK: it needs k < N={N}; use method='dense'")
    return method


def _fix_signs(V):
    """Sign eigenvectors (..., N) so that the entry of largest magnitude is positive."""
    idx = np.argmax(np.abs(V), axis=-1)
    s = np.sign(np.take_along_axis(V, idx[..., None], axis=-1))
    s[s == 0] = 1.0
    return V * s


def _start_vector(n):
    return np.random.default_rng(12345).standard_normal(n)


def _check_k(k, n):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"k={k} is larger than the system allows: L[Omega, Omega] has N={n} eigenvalues")
    return int(k)


def _krylov_residual(matvec, n, k, ncv, maxiter):
    """Relative residual of the ``k`` largest Ritz pairs of a Lanczos space comparable to ARPACK's.

    SciPy does not expose ARPACK's own Ritz estimates when nothing converged,
    so the report uses the same start vector and an unrestarted Lanczos space
    of dimension ``ncv * maxiter`` (at most 100; full reorthogonalisation):
    residual ``|beta_m s_(m,i)| / |theta_i|`` of the wanted Ritz pairs.
    """
    ncv = ncv or min(n, max(2 * k + 1, 20))
    m = int(min(n, ncv * (maxiter or n * 10), 100))
    Q = np.zeros((n, m))
    alpha, beta = np.zeros(m), np.zeros(m)
    q = _start_vector(n)
    Q[:, 0] = q / np.linalg.norm(q)
    for j in range(m):
        w = matvec(Q[:, j])
        alpha[j] = Q[:, j] @ w
        w -= Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
        w -= Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
        beta[j] = np.linalg.norm(w)
        if j + 1 < m:
            if beta[j] == 0:
                m = j + 1
                break
            Q[:, j + 1] = w / beta[j]
    T = np.diag(alpha[:m]) + np.diag(beta[:m - 1], 1) + np.diag(beta[:m - 1], -1)
    theta, S = np.linalg.eigh(T)
    top = slice(max(m - k, 0), m)
    return float(np.max(np.abs(beta[m - 1] * S[-1, top]) / np.maximum(np.abs(theta[top]), 1e-300)))


def _arpack_pair(apply_pair, apply_L, apply_Linv, n, k, tol, maxiter, ncv, sample):
    """(smallest ascending, V_s, largest descending, V_l, residuals) from ARPACK.

    The largest eigenpairs of ``L`` and of ``L^{-1}`` are two ARPACK problems
    advanced in lockstep (:func:`sheaflinalg.arpack_pair.largest_pair`);
    ``apply_pair(a, b)`` writes ``L x`` for request ``a`` and ``L^{-1} x``
    for request ``b``.  ``apply_L``/``apply_Linv`` (one vector in, one out)
    check the residuals and estimate them for the error report.
    """
    k_arpack = min(k, n - 1)
    try:
        (wl, Vl), (mu, Vs) = largest_pair(apply_pair, n, k_arpack, tol=tol, maxiter=maxiter, ncv=ncv,
                                          v0=_start_vector(n))
    except ArpackNotConverged as exc:
        which, matvec = ("largest", apply_L) if exc.index == 0 else ("smallest", apply_Linv)
        res = _krylov_residual(matvec, n, k_arpack, ncv, maxiter)
        best = (f"{len(exc.cause.eigenvalues)} of {k_arpack} eigenpairs converged, achieved relative "
                f"residual about {res:.3e} (tol {tol:g})")
        raise SpectrumConvergenceError(
            f"ARPACK did not converge for sample {sample} ({which} eigenvalues) within "
            f"maxiter={maxiter}: {best}; raise maxiter or ncv, or loosen tol",
            sample, which, res, tol) from None
    order = np.argsort(wl)[::-1]
    wl, Vl = wl[order], Vl[:, order]
    order = np.argsort(mu)[::-1]
    ws, Vs = 1.0 / mu[order], Vs[:, order]  # mu descending -> lambda ascending
    return ws, Vs, wl, Vl, (_residual(apply_L, ws, Vs), _residual(apply_L, wl, Vl))


def _residual(apply_L, lam, V):
    """Largest relative residual ``||L v_j - lambda_j v_j|| / |lambda_j|``."""
    R = np.column_stack([apply_L(V[:, j]) - lam[j] * V[:, j] for j in range(V.shape[1])])
    return float(np.max(np.linalg.norm(R, axis=0) / np.maximum(np.abs(lam), 1e-300)))


def _pair_of(apply_L, apply_Linv):
    """``apply_pair`` for :func:`_arpack_pair` from two one-vector operators."""
    def apply_pair(a, b):
        if a is not None:
            a[1][:] = apply_L(a[0])
        if b is not None:
            b[1][:] = apply_Linv(b[0])
    return apply_pair


# ------------------------------------------------------------------ dense
def _dense_laplacians(net, masks, jacobians, layout, M):
    """``L[Omega, Omega]`` of every sample as a dense (M, N, N) array (small-N path only)."""
    k = net.n_hidden
    N = layout.n_free
    D0 = np.eye(N)
    for l in range(1, k + 1):
        D0[layout.free(f"z{l + 1}"), layout.free(f"a{l}")] = -net.weights[l]
    L0 = D0.T @ D0  # mask-independent part (masks enter only through e_a rows)
    L = np.broadcast_to(L0, (M, N, N)).copy()
    for l in range(1, k + 1):
        zi = np.arange(layout.free(f"z{l}").start, layout.free(f"z{l}").stop)
        ai = np.arange(layout.free(f"a{l}").start, layout.free(f"a{l}").stop)
        m = masks[l - 1].astype(np.float64)
        L[:, zi, zi] += m
        L[:, zi, ai] -= m
        L[:, ai, zi] -= m
    if jacobians is not None:
        zk = layout.free(f"z{k + 1}")
        yh = layout.free("yhat")
        for s, J in enumerate(jacobians):
            J = np.diag(J) if J.ndim == 1 else J
            L[s, zk, zk] += J.T @ J
            L[s, zk, yh] -= J.T
            L[s, yh, zk] -= J
    return L


_BLAS = None


def _one_blas_thread():
    """Context limiting BLAS/LAPACK to one thread: threaded LAPACK on many tiny matrices
    is several times slower than serial, worse still on a busy machine."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            _BLAS = False
    return _BLAS.limit(limits=1, user_api="blas") if _BLAS else contextlib.nullcontext()


def _from_dense(L, k, vectors, full, threads=1):
    """Batched dense eigensolver; with ``threads=2`` the two halves of the batch run in parallel
    (LAPACK releases the GIL), each with a serial BLAS."""
    with _one_blas_thread():
        if threads < 2 or L.shape[0] < 8:
            return _from_dense_serial(L, k, vectors, full)
        h = L.shape[0] // 2
        with ThreadPoolExecutor(max_workers=2) as pool:
            parts = list(pool.map(lambda A: _from_dense_serial(A, k, vectors, full), (L[:h], L[h:])))
    return tuple(None if a is None else np.concatenate([a, b]) for a, b in zip(*parts))


def _from_dense_serial(L, k, vectors, full):
    if vectors:
        w, V = np.linalg.eigh(L)
        Vs = _fix_signs(np.swapaxes(V[:, :, :k], 1, 2))
        Vl = _fix_signs(np.swapaxes(V[:, :, ::-1][:, :, :k], 1, 2))
        ws, wl = w[:, :k], w[:, ::-1][:, :k]
        res_s = (np.linalg.norm(np.einsum("sij,skj->ski", L, Vs) - ws[:, :, None] * Vs, axis=2) / ws).max(axis=1)
        res_l = (np.linalg.norm(np.einsum("sij,skj->ski", L, Vl) - wl[:, :, None] * Vl, axis=2) / wl).max(axis=1)
        residuals = np.stack([res_s, res_l], axis=1)
    else:
        w = np.linalg.eigvalsh(L)
        Vs = Vl = None
        residuals = np.zeros((L.shape[0], 2))
    return (w[:, :k], w[:, ::-1][:, :k], Vs, Vl, w if full else None, residuals)


# ------------------------------------------------------------------ public
def _progress(iterable, total, enabled, desc):
    if not enabled or total < 2:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)


def spectrum(net, X, k=1, vectors=True, system="reduced", pattern=None, method="auto",
             full=False, tol=TOL, maxiter=None, ncv=None, dense_max=DENSE_MAX, threads=None,
             progress=True, pins=None, soft_pins=None, reluctance=None, solver="auto"):
    """Extreme eigenvalues of ``L[Omega, Omega]`` of every sample's activation pattern.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0) or (n_0,)
    k : int
        Number of smallest and of largest eigenpairs per sample.
    vectors : bool
        Also return the eigenvectors (needed by the energy and stability diagnostics).
    system : {"reduced", "free"}
        ``"reduced"``: the block-tridiagonal Laplacian of appendix A on
        ``z1, a1, ..., z(k+1)`` (the paper's choice for identity output; it
        does not depend on phi).  ``"free"``: the unreduced ``L[Omega, Omega]``
        with ``yhat`` and the output edge, linearised at the pattern's
        harmonic extension for a nonlinear output (``-J_phi`` in ``e_y``).
    pattern : sequence of array_like, optional
        Frozen activation pattern (see :func:`sheaflinalg.assemble`);
        default: each sample's forward-pass pattern.
    method : {"auto", "dense", "arpack"}
        ``"auto"``: dense for ``N <= dense_max`` (or ``full=True``), ARPACK otherwise.
    full : bool
        Also return the whole spectrum (dense method only).
    tol : float
        ARPACK relative tolerance on the Ritz residuals (default 1e-8, see
        :data:`TOL`; the achieved residuals of ``L`` are in ``residuals``).
    maxiter, ncv : int, optional
        ARPACK iteration limit and Krylov subspace size (scipy's defaults).
    dense_max : int
        Largest ``N`` the automatic choice diagonalises densely.
    threads : {1, 2}, optional
        ARPACK path: split the rows of every big weight matrix over two
        threads in the operator kernels (2) or not (1); dense path: split the
        batch over two threads.  Default: 2 on a machine with two cores when
        the work is large enough to pay for it.  The results do not depend on
        it.  The two-thread kernels use numba's threading layer (OpenMP when
        installed); a child forked after they ran uses the serial kernels
        (GNU OpenMP cannot start threads there).
    progress : bool
        Progress bar over the samples (ARPACK path).
    pins, soft_pins, reluctance : optional
        Hard pins, soft pins and reluctance edges (format:
        :mod:`sheaflinalg.pins`).  With any of them the system is assembled
        (:func:`sheaflinalg.assemble`) and handed to
        :func:`spectrum_of_system`: ``delta_Omega`` is then tall and the
        shift-invert uses a sparse Cholesky factor.
    solver : {"auto", "cholmod", "superlu"}
        Factorisation of the augmented systems (see :func:`spectrum_of_system`).

    Returns
    -------
    SpectrumResult

    Raises
    ------
    SpectrumConvergenceError
        ARPACK did not converge; the message gives the achieved residual.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=42)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(10, 2))
    >>> sp = sl.spectrum(net, X)
    >>> bool(np.all(sp.lambda_min <= 1.0) and np.all(sp.condition >= 1.0))
    True
    >>> sp.block_names
    ['z1', 'a1', 'z2']
    """
    X, _ = as_samples(X, net.dims[0])
    check_choice(system, SYSTEMS, "system")
    check_choice(method, METHODS, "method")
    tol = 0.0 if tol == 0 else check_positive(tol, "tol")
    reduced = system == "reduced"
    if pins is not None or soft_pins is not None or reluctance is not None:
        from .assembly import assemble

        check_choice(solver, ("auto", "cholmod", "superlu"), "solver")
        s = assemble(net, X, pattern=pattern, reduced=reduced, pins=pins, soft_pins=soft_pins,
                     reluctance=reluctance)
        return spectrum_of_system(s, k=k, vectors=vectors, solver=solver, method=method, full=full,
                                  tol=tol, maxiter=maxiter, ncv=ncv, dense_max=dense_max, progress=progress)
    layout = Layout(net.dims, reduced=reduced)
    N = layout.n_free
    k = _check_k(k, N)
    method = _choose_method(method, full, N, k, dense_max)
    if threads not in (None, 1, 2):
        raise ValueError(f"threads must be 1 or 2, got {threads!r}")
    # One BLAS thread throughout: ARPACK's and the batches' small BLAS calls gain
    # nothing from threads, and OpenBLAS's idle threads spin for a while after
    # a threaded call, taking the core the kernels' second thread needs.
    with _one_blas_thread():
        return _spectrum_of_patterns(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv,
                                     threads, progress, layout)


def _spectrum_of_patterns(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv, threads,
                          progress, layout):
    """:func:`spectrum` after validation."""
    N = layout.n_free
    two_cores = (os.cpu_count() or 1) >= 2
    M = X.shape[0]
    if pattern is None:
        zs, _ = net.forward_states(X)
        masks = [z >= 0 for z in zs[:-1]]
        zout = zs[-1]
    else:
        masks = normalise_pattern(net, pattern, M)
        zout = None
        if not reduced and net.output != "identity":
            zout = harmonic_extension(net, X, pattern=masks).preactivations[-1]
    if reduced:
        jacobians = None
    elif net.output == "identity":
        jacobians = [np.ones(net.dims[-1])] * M
    else:
        jacobians = [output_jacobian(net.output, z) for z in zout]
    blocks = [(b.name, b.slice) for b in layout.free_blocks]

    # L depends on the sample only through its pattern (and J): diagonalise each distinct one once.
    if reduced or net.output == "identity":
        first, inverse = _distinct_patterns(masks, M)
    else:
        first, inverse = np.arange(M), np.arange(M)
    masks = [m[first] for m in masks]
    if jacobians is not None:
        jacobians = [jacobians[i] for i in first]
    U = first.size

    if method == "dense":
        L = _dense_laplacians(net, masks, jacobians, layout, U)
        if threads is None:
            threads = 2 if (two_cores and U * N ** 3 >= THREADS_MIN_DENSE) else 1
        out = _from_dense(L, k, vectors, full, threads)
        n_op = 0
    else:
        if threads is None:
            threads = 2 if (two_cores and net.n_parameters >= THREADS_MIN_WEIGHTS) else 1
        weights = typed_weights(net)
        ws, wl = np.empty((U, k)), np.empty((U, k))
        Vs = np.empty((U, k, N)) if vectors else None
        Vl = np.empty((U, k, N)) if vectors else None
        residuals = np.empty((U, 2))
        n_op = 0
        for u in _progress(range(U), U, progress, "spectrum"):
            op = CoboundaryOperator(net, [m[u] for m in masks],
                                    None if reduced else jacobians[u], weights=weights, threads=threads)
            a, Va, b, Vb, res = _arpack_pair(op.apply_pair, op.laplacian_matvec, op.laplacian_solve, N, k,
                                             tol, maxiter, ncv, int(first[u]))
            ws[u], wl[u] = a, b
            residuals[u] = res
            n_op += op.n_matvec + op.n_solve
            if vectors:
                Vs[u] = _fix_signs(Va.T)
                Vl[u] = _fix_signs(Vb.T)
        out = (ws, wl, Vs, Vl, None, residuals)
    ws, wl, Vs, Vl, full_w, residuals = (None if a is None else a[inverse] for a in out)
    return SpectrumResult(ws, wl, Vs, Vl, full_w, residuals, layout, blocks, method,
                          "reduced" if reduced else "free", n_op, U)


def spectrum_of_system(system, k=1, vectors=True, solver="auto", method="auto", full=False,
                       tol=TOL, maxiter=None, ncv=None, dense_max=DENSE_MAX, progress=True):
    """Extreme eigenvalues of ``L[Omega, Omega]`` of an assembled :class:`~sheaflinalg.SheafSystem`.

    Works for any system whose ``laplacian_free`` is block diagonal over the
    samples with equal blocks, including augmented systems (pins, soft pins,
    reluctance edges) whose ``delta_free`` is tall.

    Parameters
    ----------
    system : SheafSystem (or any object with ``delta_free``, ``laplacian_free``, ``n_samples``)
    solver : {"auto", "substitution", "cholmod", "superlu"}
        Shift-invert for ``lambda_min``: ``"substitution"`` (block
        substitutions; needs a square, unpinned ``delta_free`` of a network),
        or a sparse Cholesky factor of each sample's ``L[Omega, Omega]``.
        ``"auto"``: substitution when possible, else CHOLMOD (SuperLU fallback).
    Other parameters as in :func:`spectrum`.

    Returns
    -------
    SpectrumResult

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> s = sl.assemble(net, np.ones((3, 2)), reduced=True)
    >>> sp = spectrum_of_system(s, method="arpack", solver="superlu", progress=False)
    >>> sp.method, sp.lambda_min.shape
    ('superlu', (3,))
    """
    from .factor import cholesky

    check_choice(solver, SOLVERS, "solver")
    check_choice(method, METHODS, "method")
    tol = 0.0 if tol == 0 else check_positive(tol, "tol")
    D = sp.csr_matrix(system.delta_free)
    M = int(system.n_samples)
    if M < 1:
        raise ValueError("the system has no samples")
    if D.shape[1] % M:
        raise ValueError(f"delta_free has {D.shape[1]} columns, not a multiple of {M} samples")
    N = D.shape[1] // M
    k = _check_k(k, N)
    augmented = hasattr(system, "layout_free_index")
    square = (D.shape[0] == D.shape[1] and not augmented
              and getattr(system, "network", None) is not None and getattr(system, "pattern", None) is not None)
    if solver == "substitution" and not square:
        raise ValueError("solver='substitution' needs a square delta_free of an unpinned network system; "
                         "use 'cholmod' or 'superlu'")
    method = _choose_method(method, full, N, k, dense_max)
    layout = getattr(system, "layout", None)
    if augmented:
        blocks = _augmented_blocks(layout, np.asarray(system.layout_free_index))
    elif layout is not None and layout.n_free == N:
        blocks = [(b.name, b.slice) for b in layout.free_blocks]
    else:
        layout, blocks = None, [("free", slice(0, N))]
    if solver == "auto" and method == "arpack" and square:
        net = system.network
        reduced = system.reduced
        X = system.X
        pattern = system.pattern
        return spectrum(net, X, k=k, vectors=vectors, system="reduced" if reduced else "free",
                        pattern=pattern, method="arpack", tol=tol, maxiter=maxiter, ncv=ncv,
                        progress=progress)
    Lfull = sp.csr_matrix(system.laplacian_free)
    if method == "dense":
        L = np.stack([Lfull[s * N:(s + 1) * N, s * N:(s + 1) * N].toarray() for s in range(M)])
        ws, wl, Vs, Vl, full_w, residuals = _from_dense(L, k, vectors, full)
        return SpectrumResult(ws, wl, Vs, Vl, full_w, residuals, layout, blocks, "dense",
                              "reduced" if getattr(system, "reduced", False) else "free", 0, M)
    ws = np.empty((M, k))
    wl = np.empty((M, k))
    Vs = np.empty((M, k, N)) if vectors else None
    Vl = np.empty((M, k, N)) if vectors else None
    residuals = np.empty((M, 2))
    Dc = D.tocsc()
    used = solver
    n_op = 0
    for s in _progress(range(M), M, progress, "spectrum"):
        cols = slice(s * N, (s + 1) * N)
        Ds = Dc[:, cols].tocsr()
        Ds = Ds[np.diff(Ds.indptr) > 0]
        DsT = Ds.T.tocsr()
        Ls = Lfull[cols, cols]
        counter = [0]

        def apply_L(v, Ds=Ds, DsT=DsT):
            counter[0] += 1
            return DsT @ (Ds @ v)

        if solver == "substitution":
            net = system.network
            op = CoboundaryOperator(net, [m[s] for m in system.pattern], None if system.reduced else
                                    output_jacobian(net.output, system.linearisation_point[s]))
            apply_inv = op.laplacian_solve
            used = "arpack"
        else:
            backend = "auto" if solver == "auto" else solver
            f = cholesky(Ls, backend=backend)
            used = f.backend

            def apply_inv(v, f=f):
                counter[0] += 1
                return f.solve(v)

        a, Va, b, Vb, res = _arpack_pair(_pair_of(apply_L, apply_inv), apply_L, apply_inv, N, k, tol,
                                         maxiter, ncv, s)
        ws[s], wl[s] = a, b
        residuals[s] = res
        n_op += counter[0]
        if vectors:
            Vs[s] = _fix_signs(Va.T)
            Vl[s] = _fix_signs(Vb.T)
    return SpectrumResult(ws, wl, Vs, Vl, None, residuals, layout, blocks, used,
                          "reduced" if getattr(system, "reduced", False) else "free", n_op, M)


# ------------------------------------------------------------------ tracking
class SpectralTracker:
    """Training callback recording spectral statistics (sheaf training and SGD alike).

    Call it with the ``info`` object of ``sl.train(..., callback=tracker)`` /
    ``sl.sgd(..., callback=tracker)`` (attributes ``method``, ``epoch``,
    ``step``, ``network``, ``X``).  Every ``every`` steps it computes
    :func:`spectrum` of the current network on ``X`` (default: the training
    inputs) and appends one record to :attr:`records`.

    Parameters
    ----------
    X : array_like, optional
        Inputs to probe (default: ``info.X``).
    every : int
        Record when ``info.step`` is a multiple of ``every`` (the first call
        always records).
    k, system, method, tol : see :func:`spectrum`

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from types import SimpleNamespace
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(20, 2))
    >>> tracker = SpectralTracker(X, every=1)
    >>> tracker(SimpleNamespace(method="sgd", epoch=0, step=0, network=net, X=X))
    >>> len(tracker.records), round(tracker.records[0]["lambda_min"]["median"], 3) > 0
    (1, True)
    """

    def __init__(self, X=None, every=1, k=1, system="reduced", method="auto", tol=TOL):
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        check_choice(system, SYSTEMS, "system")
        check_choice(method, METHODS, "method")
        self.X = None if X is None else np.asarray(X, dtype=np.float64)
        self.every, self.k, self.system, self.method, self.tol = int(every), k, system, method, tol
        self.records = []

    def __call__(self, info):
        step = int(getattr(info, "step", 0))
        if self.records and step % self.every:
            return
        X = self.X if self.X is not None else info.X
        sp_ = spectrum(info.network, X, k=self.k, vectors=True, system=self.system,
                       method=self.method, tol=self.tol, progress=False)
        rec = {"method": getattr(info, "method", None), "epoch": getattr(info, "epoch", None),
               "step": step}
        rec.update(sp_.summary())
        rec["blocks"] = sp_.block_names
        rec["energy_min"] = sp_.block_energy("smallest").mean(axis=0)
        rec["energy_max"] = sp_.block_energy("largest").mean(axis=0)
        rec["stability_min"] = sp_.stability("smallest")
        rec["stability_max"] = sp_.stability("largest")
        rec["lambda_min_samples"] = sp_.lambda_min.copy()
        self.records.append(rec)

    def series(self, quantity="lambda_min", stat="median"):
        """``(steps, values)`` of one statistic over the records, e.g. ``("condition", "q75")``."""
        steps = np.array([r["step"] for r in self.records])
        return steps, np.array([r[quantity][stat] for r in self.records])
