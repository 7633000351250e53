"""The checks of :func:`sheaflinalg.verify` without an assembled matrix (``backend="matrix-free"``).

``delta_Omega`` of a graph network is applied and inverted node by node
(:class:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary`); the
boundary term ``-delta_U u`` is every node's maps from the input plus its
constant (the ones block), and ``J z* - phi(z*)`` on the output edge.  So:

* the determinant certificate is structural (:mod:`.structure`): ``log det
  delta_Omega = log det L[Omega, Omega] = 0`` by structure, not computed;
* the harmonic extension is the forward substitution ``delta_Omega^{-1}
  (-delta_U u)``, compared with the forward pass;
* the discord is ``||delta_Omega w + delta_U u||`` at the forward state ``w``.

Both are relative to ``max(1, |forward pass|)``; where they overflow (values near float64's limit) they
are measured again on the state and the boundary divided by it first, as the assembled path does.

Rounding bounds (what float64 alone can make a check read; only needed where a
check fails): ``n eps cond(delta_Omega)`` for the substitution with the bound
``cond_2(delta_Omega) <= ||I + B||_2 ||(I - B)^{-1}||_2`` of
:func:`condition_bound`, and for the discord the assembled path's
``m eps || |delta| |w| ||`` built from one node's stored blocks at a time
(:func:`discord_bound`).
"""

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..._common.threads import blas_limit
from ...network import activations
from ...network.graph.nodes import INPUT
from ..layout import Layout
from ..matrix_free.bound import block_norms
from ..matrix_free.coboundary import GraphCoboundary, _jacobian_product
from ..patterns import output_jacobian
from .structure import structure_rows, unit_triangular_structure

EPS = np.finfo(np.float64).eps


@dataclass
class MatrixFreeChecks:
    """What :func:`matrix_free_checks` measures (vectors are per sample; values relative to ``scale``).

    Attributes
    ----------
    certificate : bool
        ``delta_Omega`` is square and unit lower triangular by structure (:mod:`.structure`).
    reason : str
        Why not (empty when it is).
    deviation : ndarray
        ``max |delta_Omega^{-1}(-delta_U u) - forward pass|``.
    discord : ndarray
        ``||delta_Omega w + delta_U u||`` at the forward state ``w``.
    scale : ndarray
        ``max(1, |forward pass|)``.
    n_free : int
    """

    certificate: bool
    reason: str
    deviation: np.ndarray
    discord: np.ndarray
    scale: np.ndarray
    n_free: int


def _constant(node, graph, pattern, M):
    """The node's constant term ``c_v`` for every sample, ``(M, size)``, or None when it has none (or it is zero)."""
    if node.rule.pattern is None:
        c = node.rule.constant(node, graph)
        return None if c is None or not np.any(c) else np.broadcast_to(c, (M, graph.sizes[node.name]))
    rows = [node.rule.constant(node, graph, pattern[node.name][s]) for s in range(M)]
    size = graph.sizes[node.name]
    return None if all(c is None for c in rows) else np.stack([np.zeros(size) if c is None else c for c in rows])


def boundary_term(op, X, z_out, scale=None):
    """``-delta_U u`` (divided by ``scale``) in the free order of ``op`` (a full :class:`GraphCoboundary`): every
    node's maps from the input ``X`` plus its constant, and ``phi(z*) - J z*`` on the output edge (``z_out``, the
    forward pass's); ``scale`` (a column, one row per sample), if given, divides each term before it is summed."""
    graph, M = op.graph, X.shape[0]
    rhs, X = np.zeros((M, op.layout.n_free)), _divided(X, scale)
    for node in graph.nodes:
        block = rhs[:, op.layout.edge(f"e_{node.name}")]
        c = _constant(node, graph, op.pattern, M)
        if c is not None:
            block += _divided(c, scale)
        if INPUT in node.inputs:
            prepared = op.maps.prepare(node.name, op.pattern.get(node.name))
            for i, parent in enumerate(node.inputs):
                if parent == INPUT:
                    block += op.maps.forward(node.name, i, X, prepared)
    offset = activations.apply(graph.output, z_out) - _jacobian_product(op.jacobians, z_out)
    rhs[:, op.layout.edge("e_y")] = _divided(offset, scale)
    return rhs


def _divided(a, scale):
    return a if scale is None else a / scale


def coboundary_at(graph, free, pattern, layout):
    """The full :class:`GraphCoboundary` at the forward state ``free`` (its pattern, the output linearised there)."""
    z_out = free[:, layout.free(graph.output_node)]
    return GraphCoboundary(graph, pattern, jacobians=output_jacobian(graph.output, z_out), layout=layout)


def matrix_free_checks(graph, X, free, pattern, bar=None):
    """:class:`MatrixFreeChecks` of ``graph`` at the inputs ``X`` (flat), its forward pass ``free`` (free order of
    :meth:`Layout.from_graph`, ``yhat`` included) and pattern ``pattern`` (``bar``: a progress bar, moved on
    after the product and after the substitution).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 5, 1], seed=0)
    >>> X = np.ones((2, 2))
    >>> h = sl.harmonic_extension(net, X)
    >>> c = matrix_free_checks(net.graph, X, h.free, dict(zip(net.graph.pattern_nodes, h.pattern)))
    >>> c.certificate, bool(np.all(c.deviation < 1e-14)), bool(np.all(c.discord < 1e-14))
    (True, True, True)
    """
    layout = Layout.from_graph(graph)
    certificate, reason = unit_triangular_structure(structure_rows(graph), layout)
    op = coboundary_at(graph, free, pattern, layout)
    z_out = free[:, layout.free(graph.output_node)]
    # one BLAS thread, as the forward pass's blocks (on a loaded machine threaded BLAS contends)
    with np.errstate(over="ignore", invalid="ignore"), blas_limit(1):
        scale = np.maximum(1.0, np.maximum(free.max(axis=1, initial=0.0), -free.min(axis=1, initial=0.0)))
        deviation, discord = (v / scale for v in _measured(op, X, free, z_out, None, bar))
        if not (np.all(np.isfinite(deviation)) and np.all(np.isfinite(discord))):
            # values near float64's limit: everything divided by scale first (delta is linear), nothing overflows
            deviation, discord = _measured(op, X, free / scale[:, None], z_out, scale[:, None], None)
    return MatrixFreeChecks(certificate, reason, deviation, discord, scale, layout.n_free)


def _measured(op, X, state, z_out, scale, bar):
    """``(max |delta^{-1}(-delta_U u) - state|, ||delta state + delta_U u||)`` per sample, the boundary divided by
    ``scale`` (None: as it is); ``bar`` moves on after the product and after the substitution."""
    rhs = boundary_term(op, X, z_out, scale)
    residual = op.apply(state, threads=2)      # the nodes in two threads where a second core is free
    residual -= rhs
    discord = np.sqrt(np.einsum("ij,ij->i", residual, residual))
    del residual
    _tick(bar)
    # in place: each edge's block is read once, before its free block (the same offsets) is written
    extension = op.solve(rhs, out=rhs)
    extension -= state
    deviation = np.maximum(extension.max(axis=1, initial=0.0), -extension.min(axis=1, initial=0.0))
    _tick(bar)
    return deviation, discord


def _tick(bar):
    if bar is not None:
        bar.update()


def condition_bound(graph, state):
    """An upper bound on ``cond_2(delta_Omega)`` for every pattern: ``||I + B||_2 ||(I - B)^{-1}||_2``.

    ``I + B`` is :func:`~sheaflinalg.sheaf.matrix_free.bound.block_norms` (``B[v, u]`` bounds ``||F_(u->v)||_2``,
    strictly lower triangular); ``state`` (every node's rows and ``"x"``) bounds the maps that have no bound
    over every state (products of two values) at the state verified.  ``inf`` when it overflows.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[3.0, 4.0]]), "bias": np.zeros(1)})
    >>> round(condition_bound(sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])]).graph, None), 4)
    4.0489
    """
    M = block_norms(graph, state)
    if not np.all(np.isfinite(M)):
        return float("inf")
    eye = np.eye(M.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        inverse = scipy.linalg.solve_triangular(2 * eye - M, eye, lower=True, unit_diagonal=True, check_finite=False)
        if not np.all(np.isfinite(inverse)):
            return float("inf")
        return float(np.linalg.norm(M, 2) * np.linalg.norm(inverse, 2))


def _abs_product(block, x):
    """``(|F| |x|, stored entries of each row of F)`` for one sample: ``block`` a 1-D diagonal, dense or sparse."""
    if sp.issparse(block):
        A = abs(sp.csr_matrix(block))
        return A @ np.abs(x), np.diff(A.indptr)
    block = np.asarray(block)
    if block.ndim == 1:
        return np.abs(block) * np.abs(x), np.ones(block.size, dtype=np.int64)
    return np.abs(block) @ np.abs(x), np.full(block.shape[0], block.shape[1])


def _row_magnitudes(graph, X, free, pattern, layout, s, scale):
    """``(|| |delta| |w| + |delta_U u| ||^2, most stored entries of a row)`` of sample ``s``, values divided by
    ``scale``."""
    w, x, one = free[s] / scale, X[s] / scale, {k: v[s:s + 1] for k, v in pattern.items()}
    total, widest = 0.0, 0
    for node in graph.nodes:
        magnitude, count = np.abs(w[layout.free(node.name)]), 2        # the identity, the ones block
        rows = one[node.name][0] if node.name in one else None
        for parent, block in zip(node.inputs, node.rule.blocks(node, graph, rows)):
            part, entries = _abs_product(block, x if parent == INPUT else w[layout.free(parent)])
            magnitude, count = magnitude + part, count + entries
        c = _constant(node, graph, one, 1)
        if c is not None:
            magnitude = magnitude + np.abs(c[0]) / scale
        total += float(magnitude @ magnitude)
        widest = max(widest, int(np.max(count)))
    z = free[s:s + 1, layout.free(graph.output_node)]
    J = output_jacobian(graph.output, z)
    part, entries = _abs_product(J[0], z[0] / scale)
    offset = activations.apply(graph.output, z) - _jacobian_product(J, z)
    magnitude = np.abs(w[layout.free("yhat")]) + part + np.abs(offset[0]) / scale
    return total + float(magnitude @ magnitude), max(widest, int(np.max(entries)) + 2)


def discord_bound(graph, X, free, pattern, scale):
    """Per sample, ``m eps || |delta| |w| + |delta_U u| ||`` at the forward state ``free`` and inputs ``X``,
    values divided by ``scale``: what rounding alone can make the discord read (``m`` the most stored entries
    of a row), from one node's stored blocks at a time (:meth:`~sheaflinalg.network.ops.OpRule.blocks`),
    as the assembled path's bound (only where the discord fails)."""
    layout = Layout.from_graph(graph)
    bounds = []
    with np.errstate(over="ignore", invalid="ignore"):
        for s in range(X.shape[0]):
            total, widest = _row_magnitudes(graph, X, free, pattern, layout, s, scale[s])
            bounds.append(widest * EPS * np.sqrt(total))
    return np.array(bounds)
