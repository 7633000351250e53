"""Completion (partial clamping): pin any mixture of inputs, hidden coordinates and outputs, complete the rest.

For a frozen activation pattern the completion minimises the discord
``1/2 ||delta_Omega omega + delta_U u||^2`` of the sheaf whose clamped
coordinates were moved to ``U`` (hard pins) or tied by soft-pin edges: the
normal equations ``L[Omega,Omega] omega = -L[Omega,U] u`` are solved exactly
with a sparse Cholesky factorisation (CHOLMOD, SuperLU fallback), and the
pattern is updated from the solution (``z >= 0`` active) until it settles
(the paper's note on partial clamping: a settled completion is an
equilibrium of the pinned heat dynamics).  A nonlinear output with a clamped
output vertex is handled by re-linearising ``phi`` at the current ``z(k+1)``
in the same loop (Gauss-Newton), whose fixed points are the equilibria of
the local-adjoint dynamics.

Uniqueness is first decided from the structure: when every free coordinate
keeps its defining edge (``e_z`` for ``z``, ``e_a`` for ``a``, ``e_y`` for
``yhat``), those rows of ``delta_Omega`` form a square unit lower triangular
matrix (checked exactly), so ``delta_Omega`` has full column rank and the
completion is unique however ill-conditioned ``L[Omega,Omega]`` is.  With
nothing clamped ``delta_Omega`` is that square matrix and the completion is a
forward substitution.  Freed inputs (imputation) have no defining edge and
can leave the completion non-unique: more free coordinates than the edges
constrain.  This is then detected (a count, a failed factorisation, or a
numerically zero smallest eigenvalue of ``L[Omega,Omega]``) and reported; ``nonunique="minimum_norm"`` then returns
the minimum-norm least-squares completion (LSMR from zero), and
``reluctance=lam`` adds reluctance edges that make it unique.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..._common.validation import as_samples, check_choice, check_int
from ...network.model import check_network
from ...network.graph.nodes import INPUT
from ..assembled.assembly import assemble, check_pattern, forward_pattern
from ..assembled.factor import check_backend, cholesky
from ..layout import Layout
from ..patterns import graph_pattern, same_pattern
from .specs import pins_or_clamp, resolve_pins
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding
from ..verification.rank import unit_triangular_rows
from ..verification.verify import unit_lower_triangular_certificate
from ...network.paths import GRAPH, engine

NONUNIQUE = ("error", "minimum_norm")


class NonUniqueCompletionError(ValueError):
    """The clamped coordinates do not determine the completion (see :func:`complete`)."""


@dataclass
class Completion:
    """Result of :func:`complete`.

    Attributes
    ----------
    state : ndarray, shape (n_samples, n_free)
        Completed free cochain in the layout's free order (clamped coordinates hold their values).
    inputs : ndarray, shape (n_samples, n_0)
        Inputs, with freed coordinates replaced by their completion.
    output : ndarray, shape (n_samples, n_out)
        Output stalk (``yhat``; ``z(k+1)`` for the reduced system).
    pattern : list of ndarray
        Activation pattern of the final solve, (n_samples, n_l) per hidden layer.
    settled : bool
        Every sample settled: the pattern computed from the solution equals the
        pattern it was solved with (and, for a re-linearised output, the
        linearisation point stopped moving).  A pattern that cycles means the
        pinned equilibrium sits on a switching surface (the paper's note on
        partial clamping: the heat dynamics slide there); such samples are
        reported as not settled.
    settled_samples : ndarray of bool, shape (n_samples,)
    iterations : int
        Number of linear solves.
    unique : bool
        Whether the frozen-pattern problem has a unique solution.
    method : str
        ``"substitution"`` (square unit lower triangular ``delta_Omega``),
        ``"cholesky"`` (normal equations), ``"lsmr"`` (a structurally unique
        completion whose normal equations are too ill-conditioned to factor)
        or ``"minimum_norm"``.
    discord : ndarray, shape (n_samples,)
        Discord of the (linearised) augmented sheaf at the completion.
    layout : Layout
    """

    state: np.ndarray
    inputs: np.ndarray
    output: np.ndarray
    pattern: list
    settled: bool
    settled_samples: np.ndarray
    iterations: int
    unique: bool
    method: str
    discord: np.ndarray
    layout: Layout

    def block(self, name):
        """Completed values of free block ``name``, shape (n_samples, size)."""
        return self.state[:, self.layout.free(name)]


def _smallest_eigenvalue(factor, n, iters=30, seed=0):
    """Estimate of ``lambda_min(A)`` by power iteration on ``A^{-1}`` with the factorisation."""
    v = np.random.default_rng(seed).standard_normal(n)
    v /= np.linalg.norm(v)
    mu = 0.0
    for _ in range(iters):
        w = factor.solve(v)
        nw = np.linalg.norm(w)
        if not np.isfinite(nw) or nw == 0:
            return 0.0
        mu = nw
        v = w / nw
    return 1.0 / mu


def _defining_rows(system):
    """Rows of ``delta_Omega`` holding each free coordinate's defining edge, or None (a freed input has none).

    The layout's edges come first in every sample's rows, one per layout free
    coordinate and in the same order (``e_z1 -> z1``, ``e_a1 -> a1``, ...).  Under
    ``skip_encoding="edges"``: for each free coordinate the first row whose last
    nonzero is exactly 1 there (:func:`~sheaflinalg.sheaf.verification.rank.unit_triangular_rows`).
    """
    if system.skip_encoding == "edges":     # tall: the rows of the rank certificate's unit triangular block
        A = sp.csr_matrix(system.delta_free, copy=True)
        A.eliminate_zeros()
        A.sort_indices()
        return unit_triangular_rows(A)
    lfi = np.asarray(system.layout_free_index)
    if np.any(lfi < 0):
        return None
    shift = system.n_edges_sample * np.arange(system.n_samples)
    return (shift[:, None] + lfi[None, :]).ravel()


def _lstsq(system, n):
    from scipy.sparse.linalg import lsmr

    rhs = -(system.delta_boundary @ system.u + system.edge_offset)
    return lsmr(system.delta_free, rhs, atol=1e-15, btol=1e-15, conlim=1e15, maxiter=20 * max(n, 10))[0]


def _solve_structural(system, backend):
    """(omega, method) when the structure proves the completion unique, else None."""
    rows = _defining_rows(system)
    if rows is None:
        return None
    D = system.delta_free
    if not unit_lower_triangular_certificate(D[rows])[0]:
        return None
    if D.shape[0] == D.shape[1]:
        # delta_Omega itself is unit lower triangular: forward substitution (LU with L = delta_Omega, U = I).
        import scipy.sparse.linalg as spla

        rhs = -(system.delta_boundary @ system.u + system.edge_offset)
        lu = spla.splu(D.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0)
        return lu.solve(rhs), "substitution"
    try:
        return cholesky(system.laplacian_free, backend=backend).solve(system.rhs()), "cholesky"
    except np.linalg.LinAlgError:
        return _lstsq(system, D.shape[1]), "lsmr"


def _solve(system, nonunique, backend):
    """Solve for the free coordinates of ``system``; returns (omega, unique, method)."""
    structural = _solve_structural(system, backend)
    if structural is not None:
        return structural[0], True, structural[1]
    A = system.laplacian_free
    b = system.rhs()
    n = A.shape[0]
    reason = None
    if system.n_free_sample > system.n_edges_sample:
        reason = (f"{system.n_free_sample} free coordinates per sample but only "
                  f"{system.n_edges_sample} edge equations")
    else:
        try:
            f = cholesky(A, backend=backend)
            lam_min = _smallest_eigenvalue(f, n)
            scale = max(1.0, float(abs(A.diagonal()).max()))
            if lam_min <= 1e-11 * scale:
                reason = f"L[Omega,Omega] is numerically singular (smallest eigenvalue ~ {lam_min:.2e})"
            else:
                return f.solve(b), True, "cholesky"
        except np.linalg.LinAlgError as exc:
            reason = f"L[Omega,Omega] is singular ({exc})"
    if nonunique == "error":
        raise NonUniqueCompletionError(
            f"the completion is not unique: {reason}; the clamped coordinates do not determine the "
            "free ones (typically freed inputs). Pass nonunique='minimum_norm' for the minimum-norm "
            "completion, or reluctance=lam (e.g. 1e-6) to add reluctance edges that pick one")
    return _lstsq(system, n), False, "minimum_norm"


def complete(net, X, pins=None, soft_pins=None, free_inputs=None, pattern=None, reluctance=None,
             nonunique="error", max_iter=100, backend="auto", *, clamp=None, skip_encoding=DEFAULT_SKIP_ENCODING):
    """Complete the unclamped coordinates of the neural sheaf (partial clamping).

    Parameters
    ----------
    net : Network
        A chain or a graph network (pins on any node, e.g. ``{"layer1.0.conv1": 0.0}``
        clamps a whole feature map).
    X : array_like, shape (n_samples, n_0) or (n_0,)
        Inputs (a graph network also takes ``(n_samples, *input_shape)``).  Coordinates listed in ``free_inputs`` are completed (their
        values here only seed the initial activation pattern).
    pins : dict, optional
        Hard pins ``{selector: values}`` on hidden coordinates and outputs,
        in the pin format of :mod:`sheaflinalg.sheaf.pins.specs` (e.g. ``{"a1[2]": 0.0}``,
        ``{"yhat": Y}``), as in :func:`sheaflinalg.heat` and :func:`sheaflinalg.assemble`.
    soft_pins : SoftPins or (targets, gamma), optional
        Soft pins (penalty edges).
    free_inputs : sequence of int or boolean mask, optional
        Input coordinates to complete (imputation).
    pattern : sequence of array_like or dict, optional
        Freeze this activation pattern (one solve, no pattern updates); a graph
        network's is a dict (see :func:`sheaflinalg.assemble`).
    reluctance : float or Reluctance, optional
        Reluctance edges on every free coordinate: makes a non-unique
        completion unique (the one closest to the anchor, 0 by default).
    nonunique : {"error", "minimum_norm"}
        What to do when the completion is not unique: raise
        :class:`NonUniqueCompletionError` (default), or return the
        minimum-norm least-squares completion.
    max_iter : int
        Largest number of pattern updates.
    backend : {"auto", "cholmod", "superlu"}
        Sparse Cholesky backend.
    clamp : dict, optional
        Deprecated alias of ``pins`` (a ``DeprecationWarning``; removed in the
        next release).  Giving both is a ``TypeError``.
    skip_encoding : {"sum", "edges"}
        ``"edges"``: the paper's encoding of skip connections (one edge per parent of an ``add`` or
        ``concat`` node, :mod:`sheaflinalg.sheaf.skip_edges.encoding`); the completion is then the
        least-squares solution of the tall pinned system, and the pattern is read off it as under ``"sum"``.

    Returns
    -------
    Completion

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> c = sl.complete(net, [[0.5, -1.0]])          # nothing pinned: the forward pass
    >>> bool(np.allclose(c.output, net.forward([[0.5, -1.0]]), atol=1e-12)), c.settled
    (True, True)
    >>> c = sl.complete(net, [[0.5, -1.0]], pins={"a1[0]": 2.0})
    >>> float(c.block("a1")[0, 0])
    2.0
    """
    check_network(net, graphs=True)
    pins = pins_or_clamp(pins, clamp)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    M = X.shape[0]
    check_choice(nonunique, NONUNIQUE, "nonunique")
    check_backend(backend)
    check_skip_encoding(skip_encoding)
    max_iter = check_int(max_iter, "max_iter")
    # Validate everything before any work.
    resolved = resolve_pins(net, X, None, pins, soft_pins, reluctance, free_inputs)
    lay, hard, fi = resolved.layout, resolved.hard, resolved.free_inputs
    reduced = lay.reduced
    frozen = pattern is not None
    pat = _as_list(net, check_pattern(net, pattern, M) if frozen else forward_pattern(net, X))
    nonlinear = not reduced and net.output != "identity"
    zname = net.graph.output_node       # z(k+1) of a chain, the output node of a graph
    zlin = _forward_output(net, X) if nonlinear else None
    Xc = X.copy()
    done = np.zeros(M, dtype=bool)
    history = []
    it = 0
    while it < max_iter:
        it += 1
        s = assemble(net, Xc, pattern=_from_list(net, pat), reduced=reduced, pins=pins if pins is not None else {},
                     soft_pins=soft_pins, reluctance=reluctance, free_inputs=fi, linearise_at=zlin,
                     skip_encoding=skip_encoding)
        omega, unique, method = _solve(s, nonunique, backend)
        omega = omega.reshape(M, s.n_free_sample)
        lfi = s.layout_free_index
        state = np.zeros((M, lay.n_free))
        state[:, lfi[lfi >= 0]] = omega[:, lfi >= 0]
        state[:, hard.index] = hard.values
        Xc[:, fi] = omega[:, lfi < 0]
        new_pat = _state_pattern(net, lay, state, Xc, pat)
        same = _same(net, new_pat, pat, M)
        if nonlinear:
            znew = state[:, lay.free(zname)]
            same &= np.all(np.isclose(znew, zlin, rtol=1e-13, atol=1e-13), axis=1)
            zlin = np.where(done[:, None], zlin, znew)
        done = same if frozen else (done | same)
        if done.all():
            break
        if frozen:
            if not nonlinear:
                break
            continue
        # Samples are independent: only the unsettled ones take their new pattern.
        key = b"".join(np.ascontiguousarray(p_[~done]).tobytes() for p_ in new_pat)
        pat = [np.where(done[:, None], p_, q) for p_, q in zip(pat, new_pat)]
        if key in history[-2:] and not nonlinear:
            break  # the pattern cycles: the equilibrium sits on a switching surface
        history.append(key)
    e = s.delta_free @ omega.ravel() + s.delta_boundary @ s.u + s.edge_offset
    discord = 0.5 * (e.reshape(M, -1) ** 2).sum(axis=1)
    out = state[:, lay.free(lay.output_block)]
    return Completion(state=state, inputs=Xc, output=out.copy(), pattern=_from_list(net, pat),
                      settled=bool(done.all()), settled_samples=done, iterations=it, unique=unique, method=method,
                      discord=discord, layout=lay)


def _as_list(net, pattern):
    """A pattern as a list of (n_samples, n) arrays (a graph's dict in the order of its pattern nodes)."""
    return [pattern[name] for name in net.graph.pattern_nodes] if engine(net) == GRAPH else list(pattern)


def _from_list(net, pattern):
    """Inverse of :func:`_as_list`."""
    return dict(zip(net.graph.pattern_nodes, pattern)) if engine(net) == GRAPH else pattern


def _same(net, new, old, M):
    """Per sample, whether two patterns (lists) are the same pieces (:func:`~sheaflinalg.sheaf.patterns.same_pattern`)."""
    if engine(net) == GRAPH:
        return same_pattern(net.graph, _from_list(net, new), _from_list(net, old), M)
    same = np.ones(M, dtype=bool)
    for a, b in zip(new, old):
        same &= np.all(a == b, axis=1)
    return same


def _forward_output(net, X):
    """The output node's value (``z(k+1)``) of the forward pass."""
    if engine(net) == GRAPH:
        return net.evaluate(X).values[net.graph.output_node]
    return net.forward_states(X)[0][-1]


def _state_pattern(net, lay, state, X, previous):
    """The pattern a completed state reads off itself (``z >= 0`` active, first maxima; a max-pool keeps its
    ``previous`` selection where it is still a maximum up to rounding), as a list."""
    if engine(net) == GRAPH:
        values = {node.name: state[:, lay.free(node.name)] for node in net.graph.nodes}
        values[INPUT] = X
        return _as_list(net, graph_pattern(net.graph, values, _from_list(net, previous)))
    return [state[:, lay.free(lay.z(l))] >= 0 for l in range(1, lay.n_hidden + 1)]
