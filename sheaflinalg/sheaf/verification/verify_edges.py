"""Verification under ``skip_encoding="edges"``: the rank certificate of the tall ``delta_Omega`` and the
measured distance of its least-squares harmonic extension from the forward pass."""

from dataclasses import dataclass

import numpy as np

from ..._common.memory import FLOAT, check_batch
from ..._common.validation import as_samples
from ...network.model import check_network
from ..assembled.assembly import assemble
from ..assembled.factor import resolved_backend
from ..skip_edges.least_squares import solve_normal_equations
from .rank import rank_certificate
from ...network.paths import GRAPH, engine


@dataclass
class EdgesVerificationReport:
    """Per-sample results of ``sl.verify(net, X, skip_encoding="edges")``.

    Attributes
    ----------
    network : str
        A description of the network.
    n_samples : int
    certificates : list of RankCertificate
        Full column rank of each sample's ``delta_Omega`` (structural, exact,
        or numerical with its rounding bound): the least-squares extension is
        unique exactly when it holds.
    forward_distance : ndarray
        ``max |least-squares extension - forward pass|`` over the sample's free
        coordinates, relative to ``max(1, |forward pass|)``: a measured
        number, not a check (it is 0 only where no ``add``/``concat`` parents disagree).
    discord : ndarray
        ``||delta omega||`` of the least-squares extension, relative to
        ``max(1, |forward pass|)``: the residual the compromise leaves.
    factor_backend : str
    path : str
        Which engine ran the forward pass: ``"chain"`` (the fused chain kernels) or ``"graph"``
        (:func:`~sheaflinalg.network.paths.engine`).
    """

    network: str
    n_samples: int
    certificates: list
    forward_distance: np.ndarray
    discord: np.ndarray
    factor_backend: str
    skip_encoding: str = "edges"
    path: str = None

    @property
    def passed(self):
        """True if every sample's ``delta_Omega`` is certified of full column rank."""
        return all(c.certified for c in self.certificates)

    @property
    def status(self):
        """``"PASSED"`` or ``"FAILED"`` (the rank certificate alone decides)."""
        return "PASSED" if self.passed else "FAILED"

    def __str__(self):
        methods = sorted({c.method for c in self.certificates})
        certified = sum(c.certified for c in self.certificates)
        lines = [f"sheaflinalg verify (skip_encoding='edges'): {self.network}, {self.n_samples} samples, "
                 f"Cholesky backend {self.factor_backend}", "",
                 f"rank certificate ({', '.join(methods)}): {certified}/{self.n_samples} full column rank"]
        lines += [f"sample {s}: {c}" for s, c in enumerate(self.certificates) if not c.certified][:5]
        if self.n_samples:
            lines += [f"distance of the least-squares extension from the forward pass (relative): max "
                      f"{np.max(self.forward_distance):.3e}, mean {np.mean(self.forward_distance):.3e}",
                      f"discord of the least-squares extension (relative): max {np.max(self.discord):.3e}"]
        lines.append("RESULT: " + self.status)
        return "\n".join(lines)


def _sample(system, backend):
    """The certificate, distance and discord of one assembled sample."""
    certificate = rank_certificate(system.delta_free, backend=backend, name="delta_Omega")
    reference = system.harmonic.free[0]
    scale = max(1.0, float(np.max(np.abs(reference)))) if reference.size else 1.0
    if not certificate.certified:
        return certificate, np.nan, np.nan
    free = solve_normal_equations(system, backend)[0]
    residual = system.delta_free @ free + system.delta_boundary @ system.u + system.edge_offset
    return certificate, float(np.max(np.abs(free - reference), initial=0.0)) / scale, \
        float(np.linalg.norm(residual)) / scale


def verify_edges(net, X, backend="auto"):
    """The checks of :func:`sheaflinalg.verify` with ``skip_encoding="edges"`` (``net``, ``X`` and
    ``backend`` are checked here; the caller checks its other options)."""
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    M = X.shape[0]
    check_batch(M, 3 * FLOAT, "the verification")
    rows = [_sample(assemble(net, X[s], skip_encoding="edges"), backend) for s in range(M)]
    certificates = [r[0] for r in rows]
    distance = np.array([r[1] for r in rows], dtype=np.float64)
    discord = np.array([r[2] for r in rows], dtype=np.float64)
    description = (f"graph network of {len(net.graph.nodes)} nodes" if engine(net) == GRAPH else f"network {net.dims}")
    return EdgesVerificationReport(network=f"{description}, output {net.output}", n_samples=M,
                                   certificates=certificates, forward_distance=distance, discord=discord,
                                   factor_backend=resolved_backend(backend), path=engine(net))
