"""Certificates that ``det delta_Omega = 1`` and that the harmonic extension is the forward pass."""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse.linalg as spla

from .._common.validation import as_samples, check_choice, check_tol
from ..network.model import check_network
from .assembly import assemble
from .factor import BACKENDS, cholesky, cholmod_available
from .harmonic import harmonic_extension


def unit_lower_triangular_certificate(matrix):
    """Exact check that a sparse matrix is square, lower triangular with every diagonal entry 1.0.

    Pure integer/equality tests on the stored entries: no floating-point
    tolerance is involved, so a True result proves ``det = 1``.

    Returns
    -------
    passed : bool
    reason : str
        Empty when passed, else what failed.
    """
    A = matrix.tocsr()
    A.sum_duplicates()
    n_rows, n_cols = A.shape
    if n_rows != n_cols:
        return False, f"not square: shape {A.shape}"
    rows = np.repeat(np.arange(n_rows), np.diff(A.indptr))
    upper = A.indices > rows
    if np.any(upper & (A.data != 0)):
        i = int(np.argmax(upper & (A.data != 0)))
        return False, f"entry above the diagonal at ({rows[i]}, {A.indices[i]})"
    diag = A.diagonal()
    if not np.all(diag == 1.0):
        i = int(np.argmax(diag != 1.0))
        return False, f"diagonal entry {i} is {diag[i]!r}, not exactly 1.0"
    return True, ""


def condition_estimate(D, lu):
    """1-norm condition number of the sparse square ``D`` (``lu`` its factorisation): exact up to
    100 rows, else Higham's estimate (:func:`scipy.sparse.linalg.onenormest`, a few solves with ``lu``)."""
    n = D.shape[0]
    if n <= 100:
        with np.errstate(all="ignore"):
            return float(np.linalg.cond(D.toarray(), 1))
    inverse = spla.LinearOperator((n, n), matvec=lu.solve, rmatvec=lambda v: lu.solve(v, trans="T"),
                                  dtype=np.float64)
    return float(spla.onenormest(D) * spla.onenormest(inverse))


@dataclass
class VerificationReport:
    """Per-sample results of :func:`verify`.

    Attributes
    ----------
    det_certificate : ndarray of bool
        ``delta_Omega`` is square, lower triangular and has unit diagonal (exact).
    logabsdet_delta : ndarray
        ``log|det delta_Omega|`` from a sparse LU (should be ~0).
    logdet_laplacian : ndarray
        ``log det L[Omega, Omega]`` from a sparse Cholesky (should be ~0).
    max_deviation : ndarray
        Largest ``|harmonic extension - forward pass|`` over the sample's output and
        hidden coordinates, relative to ``max(1, |forward pass|)``.
    lu_deviation : ndarray
        The same for the harmonic extension computed by the generic sparse LU solve.
    discord : ndarray
        ``||delta omega_bar||`` of the harmonic extension (0 for a global section).
    self_consistent : ndarray of bool
    condition : ndarray
        Estimate of the 1-norm condition number of ``delta_Omega``
        (``L[Omega,Omega] = delta_Omega^T delta_Omega`` has about its square).
    inconclusive : dict
        ``{check name: per-sample bool array}``: the check failed but its
        rounding-error bound (``n * eps * condition``) exceeds its tolerance, so
        the conditioning, not the network, may be the cause.  By structure
        (the exact certificate) ``det delta_Omega = 1`` and ``det L = 1`` hold anyway.
    """

    dims: list
    output: str
    n_samples: int
    det_certificate: np.ndarray
    certificate_reason: list
    logabsdet_delta: np.ndarray
    logdet_laplacian: np.ndarray
    max_deviation: np.ndarray
    lu_deviation: np.ndarray
    discord: np.ndarray
    self_consistent: np.ndarray
    factor_backend: str
    tol: float
    logdet_tol: float
    notes: list = field(default_factory=list)
    condition: np.ndarray = None
    inconclusive: dict = field(default_factory=dict)

    @property
    def checks(self):
        """Dictionary ``{check name: per-sample bool array}``."""
        return {
            "det certificate (exact)": self.det_certificate,
            "log|det delta_Omega| ~ 0": np.abs(self.logabsdet_delta) <= self.logdet_tol,
            "log det L[Omega,Omega] ~ 0": np.abs(self.logdet_laplacian) <= self.logdet_tol,
            "harmonic = forward": self.max_deviation <= self.tol,
            "LU solve = forward": self.lu_deviation <= self.tol,
            "global section (discord ~ 0)": self.discord <= self.tol * 10,
            "pattern self-consistent": self.self_consistent,
        }

    @property
    def passed(self):
        """True if every check passes for every sample."""
        return all(bool(np.all(v)) for v in self.checks.values())

    @property
    def status(self):
        """``"PASSED"``; ``"INCONCLUSIVE"`` if every failure is one the conditioning can explain; else ``"FAILED"``."""
        if self.passed:
            return "PASSED"
        for name, ok in self.checks.items():
            undecided = self.inconclusive.get(name, np.zeros_like(ok))
            if np.any(~ok & ~undecided):
                return "FAILED"
        return "INCONCLUSIVE"

    def __str__(self):
        lines = [f"sheaflinalg verify: network {self.dims}, output {self.output}, "
                 f"{self.n_samples} samples, Cholesky backend {self.factor_backend}",
                 ""]
        header = f"{'check':32s} {'passed':>9s} {'worst value':>14s}"
        lines += [header, "-" * len(header)]
        worst = {
            "det certificate (exact)": "",
            "log|det delta_Omega| ~ 0": f"{np.max(np.abs(self.logabsdet_delta)):.3e}",
            "log det L[Omega,Omega] ~ 0": f"{np.max(np.abs(self.logdet_laplacian)):.3e}",
            "harmonic = forward": f"{np.max(self.max_deviation):.3e}",
            "LU solve = forward": f"{np.max(self.lu_deviation):.3e}",
            "global section (discord ~ 0)": f"{np.max(self.discord):.3e}",
            "pattern self-consistent": "",
        }
        for name, ok in self.checks.items():
            lines.append(f"{name:32s} {int(np.sum(ok)):>4d}/{ok.size:<4d} {worst[name]:>14s}")
        lines.append("")
        lines += [f"note: {n}" for n in self.notes]
        for s in np.flatnonzero(~self.det_certificate)[:5]:
            lines.append(f"sample {s}: certificate failed: {self.certificate_reason[s]}")
        for name, undecided in self.inconclusive.items():
            if np.any(undecided):
                s = int(np.argmax(undecided))
                lines.append(f"inconclusive: {name} for {int(undecided.sum())} sample(s): delta_Omega has "
                             f"condition number ~ {self.condition[s]:.2e} (sample {s}), so rounding errors "
                             f"can exceed the tolerance; det delta_Omega = 1 holds by structure")
        lines.append(f"tolerances: deviation {self.tol:g} (relative), log det {self.logdet_tol:g}")
        lines.append("RESULT: " + self.status)
        return "\n".join(lines)


def verify(net, X, tol=1e-10, logdet_tol=1e-8, backend="auto"):
    """Certify, per sample, ``det delta_Omega = 1`` and harmonic extension = forward pass.

    For each sample: (1) an exact certificate that ``delta_Omega`` is square,
    lower triangular with every diagonal entry exactly 1.0; (2) ``log|det
    delta_Omega|`` from SciPy's sparse LU and ``log det L[Omega,Omega]`` from
    CHOLMOD (SuperLU fallback); (3) the largest deviation between the
    harmonic extension (block forward substitution, and independently a
    generic sparse LU solve of the assembled system) and the forward pass,
    the discord of the harmonic extension, and pattern self-consistency.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0) or (n_0,)
    tol : float
        Relative tolerance for the deviations (finite, >= 0).
    logdet_tol : float
        Tolerance for ``|log det|`` (finite, >= 0).
    backend : {"auto", "cholmod", "superlu"}
        Sparse Cholesky backend.

    Returns
    -------
    VerificationReport

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=0)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(10, 2))
    >>> sl.verify(net, X).passed
    True
    """
    check_network(net)
    X, _ = as_samples(X, net.dims[0])
    tol = check_tol(tol, "tol")
    logdet_tol = check_tol(logdet_tol, "logdet_tol")
    check_choice(backend, BACKENDS, "backend")
    M = X.shape[0]
    h = harmonic_extension(net, X)
    zs, hidden = net.forward_states(X)
    forward_output = net.forward(X)
    cert = np.zeros(M, dtype=bool)
    reasons = [""] * M
    logabs = np.zeros(M)
    logdet = np.zeros(M)
    dev = np.zeros(M)
    lu_dev = np.zeros(M)
    discord = np.zeros(M)
    condition = np.zeros(M)
    backend_used = "cholmod" if backend != "superlu" and cholmod_available() else "superlu"
    for s in range(M):
        system = assemble(net, X[s])
        D = system.delta_free
        cert[s], reasons[s] = unit_lower_triangular_certificate(D)
        lu = spla.splu(D.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0)
        with np.errstate(divide="ignore"):
            logabs[s] = np.sum(np.log(np.abs(lu.U.diagonal()))) + np.sum(np.log(np.abs(lu.L.diagonal())))
        condition[s] = condition_estimate(D, lu)
        try:
            with np.errstate(invalid="ignore", divide="ignore"):
                logdet[s] = cholesky(system.laplacian_free, backend=backend).logdet()
        except np.linalg.LinAlgError:
            logdet[s] = np.nan  # the factorisation broke down: judged against the conditioning below
        rhs = -(system.delta_boundary @ system.u + system.edge_offset)
        omega_lu = lu.solve(rhs)
        reference = np.concatenate([np.concatenate([z[s], a[s]]) for z, a in zip(zs[:-1], hidden)]
                                   + [zs[-1][s], forward_output[s]])
        # reference is in layout order z1, a1, ..., z(k+1), yhat
        scale = max(1.0, float(np.max(np.abs(reference))))
        dev[s] = np.max(np.abs(h.free[s] - reference)) / scale
        lu_dev[s] = np.max(np.abs(omega_lu - reference)) / scale
        discord[s] = np.linalg.norm(D @ h.free[s] + system.delta_boundary @ system.u + system.edge_offset) / scale
    notes = []
    if net.output != "identity":
        notes.append(f"output {net.output} is nonlinear: the e_y block row uses the linearised map "
                     "-J_phi(z*) at the forward-pass pre-activation z*; delta_Omega stays unit lower triangular")
    n = float(D.shape[0])
    eps = np.finfo(np.float64).eps
    # A check that failed is inconclusive when its rounding-error bound exceeds its tolerance.
    with np.errstate(over="ignore"):
        undecided_logdet = n * eps * condition ** 2 > logdet_tol
    undecided_solve = n * eps * condition > tol
    inconclusive = {"log|det delta_Omega| ~ 0": ~(np.abs(logabs) <= logdet_tol) & (n * eps * condition > logdet_tol),
                    "log det L[Omega,Omega] ~ 0": ~(np.abs(logdet) <= logdet_tol) & undecided_logdet,
                    "LU solve = forward": ~(lu_dev <= tol) & undecided_solve,
                    "global section (discord ~ 0)": ~(discord <= tol * 10) & undecided_solve}
    return VerificationReport(
        condition=condition, inconclusive=inconclusive, dims=net.dims, output=net.output, n_samples=M, det_certificate=cert,
        certificate_reason=reasons, logabsdet_delta=logabs, logdet_laplacian=logdet,
        max_deviation=dev, lu_deviation=lu_dev, discord=discord,
        self_consistent=h.self_consistent, factor_backend=backend_used, tol=tol,
        logdet_tol=logdet_tol, notes=notes)
