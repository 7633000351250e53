"""Certificates that ``det delta_Omega = 1`` and that the harmonic extension is the forward pass."""

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse.linalg as spla

from ..._common.memory import FLOAT, InsufficientMemoryError, check_batch
from ..._common.progress import progress_bar, progress_iter
from ..._common.validation import as_samples, check_bool, check_tol
from ...network.model import check_network
from ..assembled.assembly import assemble, check_system_memory
from ..assembled.factor import check_backend, cholesky, resolved_backend
from ..harmonic import graph_extension, harmonic_extension
from ..layout import Layout
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding
from .condition import CONDITION_STEPS, condition_lower_estimate
from .matrix_free import EPS, coboundary_at, condition_bound, discord_bound, matrix_free_checks
from .verify_edges import verify_edges
from ..._common.threads import blas_limit
from ...network.graph.nodes import INPUT
from ...network.paths import GRAPH, engine


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


#: Names of the checks, in report order.
CHECKS = ("det certificate (exact)", "log|det delta_Omega| ~ 0", "log det L[Omega,Omega] ~ 0", "harmonic = forward",
          "LU solve = forward", "global section (discord ~ 0)", "pattern self-consistent")
#: The backend that verifies without assembling a matrix (:mod:`.matrix_free`).
MATRIX_FREE = "matrix-free"
#: Exit status of ``sheaflinalg verify`` for each verdict (2 is a usage error).
EXIT_STATUS = {"PASSED": 0, "FAILED": 1, "INCONCLUSIVE": 3}


@dataclass
class VerificationReport:
    """Per-sample results of :func:`verify`.

    Attributes
    ----------
    det_certificate : ndarray of bool
        ``delta_Omega`` is square, lower triangular and has unit diagonal (exact).
    logabsdet_delta : ndarray or None
        ``log|det delta_Omega|`` from a sparse LU (should be ~0); None when verified matrix-free (0 by structure).
    logdet_laplacian : ndarray or None
        ``log det L[Omega, Omega]`` from a sparse Cholesky (should be ~0); None when matrix-free.
    max_deviation : ndarray
        Largest ``|harmonic extension - forward pass|`` over the sample's output and
        hidden coordinates, relative to ``max(1, |forward pass|)``.
    lu_deviation : ndarray or None
        The same for the harmonic extension computed by the generic sparse LU solve (None when matrix-free;
        ``max_deviation`` then compares the forward substitution in ``delta_Omega`` with the forward pass).
    discord : ndarray
        ``||delta omega_bar||`` of the harmonic extension (0 for a global section),
        relative to ``max(1, |forward pass|)``.
    self_consistent : ndarray of bool
    condition : ndarray
        Estimate of the 1-norm condition number of ``delta_Omega``
        (``L[Omega,Omega] = delta_Omega^T delta_Omega`` has about its square); matrix-free, of its 2-norm
        condition number: a sound upper bound where ``harmonic = forward`` fails, else a lower estimate
        (:func:`~sheaflinalg.sheaf.verification.condition.condition_lower_estimate`: a few Lanczos steps at
        each end of the spectrum).  ``condition_kind`` says which.
    condition_kind : str
        ``"1-norm estimate"`` (assembled), ``"upper bound"`` or ``"lower estimate"`` (matrix-free).
    rounding_bound : dict
        ``{check name: per-sample array}``: what rounding errors alone can make
        the numerical checks read, in the check's own units (``inf`` when the
        computation overflows float64).
    inconclusive : dict
        ``{check name: per-sample bool array}``: the check failed but its
        rounding bound exceeds (or is not below) its tolerance, so float64,
        not the network, may be the cause.  By structure (the exact
        certificate) ``det delta_Omega = 1`` and ``det L = 1`` hold anyway.
    factor_backend : str
        ``"cholmod"`` or ``"superlu"`` (the assembled checks), or ``"matrix-free"`` (nothing assembled).
    path : str
        Which engine gave the harmonic extension: ``"chain"`` (the fused chain kernels) or ``"graph"``
        (:func:`~sheaflinalg.network.paths.engine`).
    """

    dims: object
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
    condition_kind: str = "1-norm estimate"
    inconclusive: dict = field(default_factory=dict)
    rounding_bound: dict = field(default_factory=dict)
    path: str = None

    @property
    def values(self):
        """``{check name: per-sample values}`` of the numerical checks this report made (the matrix-free
        path makes no log determinant and no LU solve)."""
        values = dict(zip(CHECKS[1:6], (self.logabsdet_delta, self.logdet_laplacian, self.max_deviation,
                                        self.lu_deviation, self.discord)))
        return {name: v for name, v in values.items() if v is not None}

    @property
    def tolerances(self):
        """``{check name: tolerance}`` of the numerical checks."""
        tolerances = {CHECKS[1]: self.logdet_tol, CHECKS[2]: self.logdet_tol, CHECKS[3]: self.tol,
                      CHECKS[4]: self.tol, CHECKS[5]: self.tol * 10}
        return {name: tolerances[name] for name in self.values}

    @property
    def checks(self):
        """Dictionary ``{check name: per-sample bool array}``."""
        out = {CHECKS[0]: self.det_certificate}
        out.update({name: np.abs(v) <= self.tolerances[name] for name, v in self.values.items()})
        out[CHECKS[6]] = self.self_consistent
        return out

    @property
    def passed(self):
        """True if every check passes for every sample."""
        return all(bool(np.all(v)) for v in self.checks.values())

    @property
    def status(self):
        """``"PASSED"``; ``"INCONCLUSIVE"`` if every failure is one float64 can explain; else ``"FAILED"``."""
        if self.passed:
            return "PASSED"
        for name, ok in self.checks.items():
            undecided = self.inconclusive.get(name, np.zeros_like(ok))
            if np.any(~ok & ~undecided):
                return "FAILED"
        return "INCONCLUSIVE"

    def __str__(self):
        how = ("matrix-free (nothing assembled)" if self.factor_backend == MATRIX_FREE
               else f"Cholesky backend {self.factor_backend}")
        lines = [f"sheaflinalg verify: network {self.dims}, output {self.output}, {self.n_samples} samples, {how}",
                 ""]
        header = f"{'check':32s} {'passed':>9s} {'inconclusive':>12s} {'worst value':>14s}"
        lines += [header, "-" * len(header)]
        values = self.values
        for name, ok in self.checks.items():
            worst = f"{np.max(np.abs(values[name])):.3e}" if name in values else ""
            undecided = int(np.sum(self.inconclusive.get(name, 0)))
            lines.append(f"{name:32s} {int(np.sum(ok)):>4d}/{ok.size:<4d} {undecided or '':>12} {worst:>14s}")
        lines.append("")
        if self.factor_backend == MATRIX_FREE and self.condition is not None:
            lines.append(_condition_line(self.condition_kind, self.condition))
        if CHECKS[1] not in values:
            lines.append("log|det delta_Omega| = log det L[Omega,Omega] = 0 by structure (the determinant of a unit "
                         "lower triangular matrix, certified above): not computed")
        lines += [f"note: {n}" for n in self.notes]
        for s in np.flatnonzero(~self.det_certificate)[:5]:
            lines.append(f"sample {s}: certificate failed: {self.certificate_reason[s]}")
        lines += [self._inconclusive_line(name) for name, u in self.inconclusive.items() if np.any(u)]
        lines.append(f"tolerances: deviation {self.tol:g} (relative), log det {self.logdet_tol:g}")
        lines.append("RESULT: " + self.status)
        return "\n".join(lines)

    def _inconclusive_line(self, name):
        undecided = self.inconclusive[name]
        s = int(np.argmax(undecided))
        bound = self.rounding_bound[name][s]
        if name == CHECKS[5]:
            cause = ("its terms overflow float64" if not np.isfinite(bound)
                     else "the residual sums terms far larger than the state")
        else:
            about = "at most" if self.factor_backend == MATRIX_FREE else "~"
            cause = f"delta_Omega has condition number {about} {self.condition[s]:.2e}"
        return (f"inconclusive: {name} for {int(undecided.sum())} sample(s): its rounding-error bound "
                f"{bound:.2e} (sample {s}) exceeds the tolerance {self.tolerances[name]:g}: {cause}; "
                "det delta_Omega = 1 holds by structure")


def verify(net, X, tol=1e-10, logdet_tol=1e-8, backend="auto", skip_encoding=DEFAULT_SKIP_ENCODING, progress=False):
    """Certify, per sample, ``det delta_Omega = 1`` and harmonic extension = forward pass, at any size.

    For each sample: (1) an exact certificate that ``delta_Omega`` is square,
    lower triangular with every diagonal entry exactly 1.0; (2) ``log|det
    delta_Omega|`` from SciPy's sparse LU and ``log det L[Omega,Omega]`` from
    CHOLMOD (SuperLU fallback); (3) the largest deviation between the
    harmonic extension (block forward substitution, and independently a
    generic sparse LU solve of the assembled system) and the forward pass,
    the discord of the harmonic extension, and pattern self-consistency.

    The verdict (:attr:`VerificationReport.status`) is PASSED, FAILED, or
    INCONCLUSIVE when every failing check is one whose rounding-error bound
    exceeds its tolerance: ``n eps cond(delta_Omega)`` for the solves and the
    log determinant of ``delta_Omega``, its square for ``log det L``,
    ``m eps || |delta| |omega| || / max(1, |omega|)`` for the discord
    (``m`` the entries of a row), infinite when the computation overflows.

    A network too large to assemble (ResNet-50 on one 224x224 image would
    need hundreds of GiB) is verified without a matrix
    (:mod:`~sheaflinalg.sheaf.verification.matrix_free`): the certificate is
    read off the graph (every node one defining edge, its diagonal block the
    identity, its other blocks on earlier nodes or the boundary:
    :mod:`~sheaflinalg.sheaf.verification.structure`), so ``log det
    delta_Omega = log det L[Omega,Omega] = 0`` by structure and is not
    computed; the harmonic extension is the forward substitution in
    ``delta_Omega`` node by node, compared with the forward pass (with the
    substitution's rounding bound ``n eps cond(delta_Omega)``, ``cond`` bounded
    through the ops' norm bounds), and the discord is ``delta_Omega`` applied to
    the forward state, with the bound above.  No LU solve is made.

    Parameters
    ----------
    net : Network
        A chain or a graph network (its ``delta_Omega`` is square and unit lower
        triangular too: one defining edge per node, in topological order).
    X : array_like, shape (n_samples, n_0) or (n_0,)
        A graph network also takes ``(n_samples, *input_shape)``.
    tol : float
        Relative tolerance for the deviations (finite, >= 0).
    logdet_tol : float
        Tolerance for ``|log det|`` (finite, >= 0).
    backend : {"auto", "cholmod", "superlu", "matrix-free"}
        Sparse Cholesky backend of the assembled checks, or ``"matrix-free"``:
        nothing assembled (not with ``skip_encoding="edges"``).  ``"auto"``
        assembles (CHOLMOD if installed) when one sample's sparse system fits in
        memory, else verifies matrix-free; the report's ``factor_backend`` says which.
    skip_encoding : {"sum", "edges"}
        ``"edges"``: the paper's encoding of skip connections
        (:mod:`sheaflinalg.sheaf.skip_edges.encoding`), whose ``delta_Omega`` is tall:
        the report is an :class:`~sheaflinalg.sheaf.verification.verify_edges.EdgesVerificationReport`,
        the rank certificate of ``delta_Omega`` (structural or numerical with its
        rounding bound) and the measured distance of its least-squares
        extension from the forward pass (``tol`` and ``logdet_tol`` do not apply).
    progress : bool
        A progress bar (stderr): over the samples when assembled, over the three passes (the forward
        pass, the product, the substitution) and the condition number when matrix-free.

    Returns
    -------
    VerificationReport or EdgesVerificationReport

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=0)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(10, 2))
    >>> sl.verify(net, X).status
    'PASSED'
    >>> report = sl.verify(net, X, backend="matrix-free")
    >>> report.status, report.factor_backend, "LU solve = forward" in report.checks
    ('PASSED', 'matrix-free', False)
    """
    edges = check_skip_encoding(skip_encoding) == "edges"
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    tol = check_tol(tol, "tol")
    logdet_tol = check_tol(logdet_tol, "logdet_tol")
    _check_backend(backend, edges)
    progress = check_bool(progress, "progress")
    if edges:
        return verify_edges(net, X, backend)
    M = X.shape[0]
    if not _assembles(net, backend):
        # the forward pass, its copy in free order, the substitution, the boundary term and the residual
        check_batch(M, 5 * FLOAT * Layout.for_network(net).n_free, "the verification")
        with progress_bar(4, progress, "verify (matrix-free)", unit="pass") as bar:
            return _verify_matrix_free(net, X, tol, logdet_tol, bar)
    check_batch(M, 2 * FLOAT * Layout.for_network(net).n_free, "the verification")   # beside the harmonic extension
    h = harmonic_extension(net, X)
    reference = _forward_reference(net, X)
    rows = [_sample_checks(assemble(net, X[s]), h.free[s], reference[s], backend)
            for s in progress_iter(range(M), M, progress, "verify")]
    (cert, reasons, logabs, logdet, dev, lu_dev, discord, condition, residual_bound,
     n) = (list(c) for c in zip(*rows))
    cert, logabs, logdet, dev, lu_dev, discord, condition, residual_bound = map(
        np.array, (cert, logabs, logdet, dev, lu_dev, discord, condition, residual_bound))
    with np.errstate(over="ignore", invalid="ignore"):
        solve_bound = n[0] * EPS * condition
        bounds = {CHECKS[1]: solve_bound, CHECKS[2]: solve_bound * condition, CHECKS[4]: solve_bound,
                  CHECKS[5]: residual_bound}
    report = VerificationReport(
        condition=condition, rounding_bound=bounds, dims=_describe(net), output=net.output, n_samples=M,
        det_certificate=cert, certificate_reason=reasons, logabsdet_delta=logabs, logdet_laplacian=logdet,
        max_deviation=dev, lu_deviation=lu_dev, discord=discord,
        self_consistent=h.self_consistent, factor_backend=resolved_backend(backend), tol=tol,
        logdet_tol=logdet_tol, notes=_notes(net), path=engine(net))
    return _decided(report, bounds)


def _check_backend(backend, edges):
    """``backend`` if :func:`verify` takes it (``"matrix-free"`` not with ``skip_encoding="edges"``), else raise."""
    if isinstance(backend, str) and backend == MATRIX_FREE and not edges:
        return backend
    try:
        return check_backend(backend)
    except ValueError as exc:
        also = "" if edges else f" or {MATRIX_FREE!r} (skip_encoding='sum')"
        raise ValueError(f"{exc}{also}") from None


def _assembles(net, backend):
    """Whether :func:`verify` assembles: always with a named Cholesky backend, never with ``"matrix-free"``;
    with ``"auto"`` when the sparse system of one sample fits in memory (the samples are assembled one at a
    time, so every batch verified assembled before still is)."""
    if backend != "auto":
        return backend != MATRIX_FREE
    try:
        check_system_memory(net, 1)
    except InsufficientMemoryError:
        return False
    return True


def _notes(net):
    """The report's notes on ``net`` (a nonlinear output's linearised edge)."""
    if net.output == "identity":
        return []
    return [f"output {net.output} is nonlinear: the e_y block row uses the linearised map "
            "-J_phi(z*) at the forward-pass pre-activation z*; delta_Omega stays unit lower triangular"]


def _decided(report, bounds):
    """``report`` with its rounding bounds and inconclusive checks: a failed check is inconclusive when
    rounding alone can exceed its tolerance (a NaN bound counts)."""
    checks, tolerances = report.checks, report.tolerances
    report.rounding_bound = bounds
    report.inconclusive = {name: ~checks[name] & ~(b <= tolerances[name]) for name, b in bounds.items()}
    return report


def _verify_matrix_free(net, X, tol, logdet_tol, bar):
    """:func:`verify` without assembling (:mod:`.matrix_free`): the structural certificate, the substitution
    and the discord; the rounding bounds of the checks that fail (``bar``: a progress bar of four steps: three passes and the condition number)."""
    graph, M = net.graph, X.shape[0]
    h = harmonic_extension(net, X) if engine(net) == GRAPH else graph_extension(graph, X)
    bar.update()
    c = matrix_free_checks(graph, X, h.free, h.pattern, bar)
    report = VerificationReport(
        condition=np.full(M, np.nan), dims=_describe(net), output=net.output, n_samples=M,
        det_certificate=np.full(M, c.certificate), certificate_reason=[c.reason] * M, logabsdet_delta=None,
        logdet_laplacian=None, max_deviation=c.deviation, lu_deviation=None, discord=c.discord,
        self_consistent=h.self_consistent, factor_backend=MATRIX_FREE, tol=tol, logdet_tol=logdet_tol,
        notes=_notes(net), path=engine(net))
    checks, bounds = report.checks, {}
    if not np.all(checks[CHECKS[3]]):
        state = {node.name: h.node(node.name) for node in graph.nodes}
        report.condition = np.full(M, condition_bound(graph, {**state, INPUT: X}))
        report.condition_kind = "upper bound"
        with np.errstate(over="ignore", invalid="ignore"):
            bounds[CHECKS[3]] = c.n_free * EPS * report.condition
    else:
        with blas_limit(1):
            op = coboundary_at(graph, h.free, h.pattern, Layout.from_graph(graph))
            report.condition = condition_lower_estimate(op, M)
        report.condition_kind = "lower estimate"
    bar.update()
    if not np.all(checks[CHECKS[5]]):
        bounds[CHECKS[5]] = discord_bound(graph, X, h.free, h.pattern, c.scale)
    return _decided(report, bounds)


def _condition_line(kind, condition):
    """The report's line on ``cond_2(delta_Omega)`` (matrix-free): a bound or a labelled estimate."""
    worst = float(np.max(condition))
    if kind == "upper bound":
        return f"cond_2(delta_Omega) <= {worst:.3e} (largest over the samples; a sound bound)"
    return (f"cond_2(delta_Omega) >= {worst:.3e} (largest over the samples; an estimate from {CONDITION_STEPS} "
            "Lanczos steps at each end of L's spectrum, a lower bound; the sound upper bound is computed only "
            "where the substitution check fails)")


def _describe(net):
    """What the report calls the network: its widths, or a graph's nodes and input shape."""
    if engine(net) == GRAPH:
        return f"graph of {len(net.graph.nodes)} nodes on input {net.input_shape}"
    return net.dims


def _forward_reference(net, X):
    """The forward pass in layout order ``z1, a1, ..., z(k+1), yhat``, shape ``(n_samples, n_free)``
    (a graph network: every node's value in topological order, then ``net.forward``)."""
    if engine(net) == GRAPH:
        values = net.evaluate(X).values
        return np.concatenate([values[node.name] for node in net.graph.nodes] + [net.forward(X)], axis=1)
    zs, hidden = net.forward_states(X)
    blocks = [b for z, a in zip(zs[:-1], hidden) for b in (z, a)] + [zs[-1], net.forward(X)]
    return np.concatenate(blocks, axis=1)


def _sample_checks(system, free, reference, backend):
    """The checks of one sample; every vector is divided by ``scale = max(1, |forward pass|)`` first,
    so that values near the float64 limit do not overflow in the products and norms."""
    D = system.delta_free
    cert, reason = unit_lower_triangular_certificate(D)
    lu = spla.splu(D.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0)
    with np.errstate(divide="ignore"):
        logabs = np.sum(np.log(np.abs(lu.U.diagonal()))) + np.sum(np.log(np.abs(lu.L.diagonal())))
    condition = condition_estimate(D, lu)
    try:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            logdet = cholesky(system.laplacian_free, backend=backend).logdet()
    except np.linalg.LinAlgError:
        logdet = np.nan  # the factorisation broke down: judged against the conditioning
    scale = max(1.0, float(np.max(np.abs(reference))))
    free, reference = free / scale, reference / scale
    boundary = system.delta_boundary @ (system.u / scale) + system.edge_offset / scale
    with np.errstate(over="ignore", invalid="ignore"):
        omega_lu = lu.solve(-boundary)
        residual = D @ free + boundary
        magnitude = abs(D) @ np.abs(free) + abs(system.delta_boundary) @ np.abs(system.u / scale) \
            + np.abs(system.edge_offset / scale)
        per_row = np.diff(D.tocsr().indptr) + np.diff(system.delta_boundary.tocsr().indptr) + 1
        residual_bound = float(np.max(per_row)) * np.finfo(np.float64).eps * np.linalg.norm(magnitude)
        discord = np.linalg.norm(residual)
    dev = np.max(np.abs(free - reference))
    lu_dev = np.max(np.abs(omega_lu - reference))
    return cert, reason, logabs, logdet, dev, lu_dev, discord, condition, residual_bound, D.shape[0]
