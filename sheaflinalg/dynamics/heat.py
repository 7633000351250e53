"""Heat-equation inference: forward Euler on the restricted sheaf heat equation.

:func:`heat` runs ``d omega/dt = -alpha (L[Omega,Omega] omega + L[Omega,U] u)``
(paper eq. neural-restricted) with the state-dependent ReLU sheaf (mask
``z >= 0`` of the current state, recomputed every step) for a batch of
independent samples; nonlinear outputs use the output vertex and the local
adjoint (eq. final-dynamics).  The whole time loop is the numba kernel
:func:`sheaflinalg.kernels.heat.heat_run`.
"""

from dataclasses import dataclass, field

import numpy as np

from .._common.progress import progress_bar
from .._common.threads import resolve_threads
from .._common.validation import (as_samples, check_choice, check_int, check_optional_int, check_positive,
                                  check_seed, check_tol)
from ..kernels import force as _force
from ..kernels import heat as _kheat
from ..sheaf import pins as _pins
from ..sheaf.layout import Layout
from ..sheaf.state import initial_state, to_rows
from . import parts as _parts
from .discord import group_history

OUTPUT_FORCES = ("adjoint", "discrepancy")
METHODS = ("euler", "exact")


class NonFiniteStateError(FloatingPointError, ValueError):
    """A NaN or Inf appeared in the state during a run (the message names the step)."""


def weight_norm(W):
    """Spectral norm ``||W||_2``: exact (LAPACK SVD) up to 2000 columns/rows, else ARPACK ``svds`` + 1 %."""
    if min(W.shape) <= 2000:
        return float(np.linalg.norm(W, 2))
    from scipy.sparse.linalg import svds

    return 1.01 * float(svds(W, k=1, return_singular_vectors=False)[0])


def lambda_max_bound(net, gamma_max=0.0, reluctance=0.0):
    """Upper bound on ``lambda_max(L[Omega, Omega])`` valid for every activation pattern.

    ``delta_Omega = I - N`` where ``N`` holds one block per block row and per
    block column (``R_l``, ``W_{l+1}`` for ``l >= 1``, and the output Jacobian
    ``J``), so ``||N||_2`` is the largest block norm and

    ``lambda_max <= (1 + max(1, ||W_2||_2, ..., ||W_{k+1}||_2))^2 + max gamma + lambda``

    (``||R|| <= 1``; ``||J|| <= 1`` for sigmoid, tanh and softmax; hard pins
    take principal submatrices, which only lowers ``lambda_max``; soft pins
    and reluctance add at most ``gamma + lambda`` on the diagonal).  For a
    nonlinear output it bounds the linearised (Gauss-Newton) operator; the
    output curvature term ``phi''(z) (phi(z) - yhat)`` is not included.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> lambda_max_bound(net) >= 4.0
    True
    """
    m = 1.0
    for W in net.weights[1:]:
        m = max(m, weight_norm(W))
    return (1.0 + m) ** 2 + float(gamma_max) + float(reluctance)


@dataclass
class HeatHistory:
    """What :func:`heat` recorded every ``record_every`` steps (and at the final step).

    Attributes
    ----------
    steps : ndarray of int, shape (n_rec,)
    discord : ndarray, shape (n_rec, n_blocks)
        Discord summed over the batch, one column per label in ``labels``:
        the layout's edge blocks, then ``"e_pin"`` (all soft-pin edges, if any)
        and ``"e_rel"`` (all reluctance edges, if any).  Edge blocks:
        ``1/2 ||E_e||^2``; the output edge of a nonlinear output uses
        ``1/2 ||yhat - phi(z)||^2`` (eq. output-potential).
    labels : list of str
    sample_discord : ndarray, shape (n_rec, n_samples)
        Total discord of each sample.
    output : ndarray, shape (n_rec, n_samples, n_out)
        The output stalk (``yhat``, or ``z(k+1)`` for the reduced system).
    states : ndarray, shape (n_rec, n_selected, n_free)
        Full free cochains of the samples ``state_samples`` (layout free order).
    state_samples : ndarray of int
    layout : Layout
    """

    steps: np.ndarray
    discord: np.ndarray
    labels: list
    sample_discord: np.ndarray
    output: np.ndarray
    states: np.ndarray
    state_samples: np.ndarray
    layout: Layout

    @property
    def total(self):
        """Total discord over the batch, shape (n_rec,)."""
        return self.discord.sum(axis=1)

    def by_type(self):
        """``{edge kind: (n_rec,) discord}``: ``weight``, ``activation``, ``output``, ``pin``, ``reluctance``."""
        return group_history(self, "type")

    def by_layer(self):
        """``{layer: (n_rec,) discord}`` (layer of each edge block; ``pin``/``reluctance`` kept apart)."""
        return group_history(self, "layer")


@dataclass
class HeatResult:
    """Result of :func:`heat`.

    Attributes
    ----------
    state : ndarray, shape (n_samples, n_free)
        Final free cochain, layout free order (pinned coordinates hold their pins).
    output : ndarray, shape (n_samples, n_out)
        Final output stalk (``yhat``; ``z(k+1)`` for identity output without output pins).
    steps : int
    converged : bool
        The largest change of a free coordinate in the last step was below ``tol``.
    final_change : float
    discord : ndarray, shape (n_samples,)
        Total discord of the final state.
    edge_discrepancy : ndarray, shape (n_samples, n_edges)
        ``E`` of the final state (edge order of the layout).
    history : HeatHistory or None
    crossings : ndarray of int, shape (n, 5)
        ``(step, sample, layer, neuron, new_active)`` for every sign change of
        a hidden pre-activation: the mask ``z >= 0`` after Euler step ``step``
        (1-based) differs from the one before it; ``new_active`` is the new mask.
    crossings_total : int
        Number of crossings (more than ``len(crossings)`` if the buffer filled).
    sliding : ndarray of int, shape (n, 6)
        Sliding episodes ``(sample, layer, neuron, first_step, last_step, n_flips)``,
        sorted by (first step, layer, neuron, sample).
    sliding_total : int
        Number of sliding episodes (more than ``len(sliding)`` if the buffer filled).
    layout : Layout
    pinned : list of str
        Labels of the hard-pinned coordinates.
    lambda_max_bound : float
    dt : float
    alpha : float
    """

    state: np.ndarray
    output: np.ndarray
    steps: int
    converged: bool
    final_change: float
    discord: np.ndarray
    edge_discrepancy: np.ndarray
    history: object
    crossings: np.ndarray
    crossings_total: int
    sliding: np.ndarray
    layout: Layout
    sliding_total: int = 0
    pinned: list = field(default_factory=list)
    lambda_max_bound: float = float("nan")
    dt: float = float("nan")
    alpha: float = float("nan")

    def __repr__(self):
        return (f"HeatResult(steps={self.steps}, converged={self.converged}, "
                f"final_change={self.final_change:.3g}, n_samples={self.state.shape[0]}, "
                f"crossings={self.crossings_total}, sliding_episodes={self.sliding_total})")

    def block(self, name):
        """Final values of free block ``name`` (e.g. ``"a1"``), shape (n_samples, size)."""
        return self.state[:, self.layout.free(name)]


def _initial_columns(net, X, lay, init, seed, hard):
    """Initial free cochain (columns layout), hard pins set."""
    # Copy: for one free row or one sample the columns view can alias the caller's init array.
    S = np.array(initial_state(net, X, lay, init, seed), dtype=np.float64, order="C", copy=True)
    S[hard.index] = hard.values.T
    return S


def heat(net, X, alpha=1.0, dt=0.01, max_steps=100_000, tol=1e-12, init="random", seed=None,
         pins=None, soft_pins=None, reluctance=None, record_every=0, record_states=None,
         output_force="adjoint", reduced=None, crossings=True, max_crossings=100_000,
         sliding_window=5, sliding_min_flips=3, check_stability=True, progress=True, threads=None,
         method="euler", t_max=None, max_events=10_000):
    """Run the restricted sheaf heat equation by forward Euler (or exactly) until it settles.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0) or (n_0,)
        Inputs (always pinned).  Samples are independent sheaves run together.
    alpha : float
        Diffusion rate.
    dt : float
        Euler step; refused if ``alpha * dt * lambda_max_bound >= 2`` (see
        :func:`lambda_max_bound`), with the largest stable ``dt`` in the message.
    max_steps : int
    tol : float
        Stop when the largest change of any free coordinate in one step is below ``tol``.
    init : {"random", "zeros", "forward"} or array_like
        Initial free stalks (see :func:`sheaflinalg.sheaf.state.initial_state`);
        an array has shape (n_samples, n_free) in the layout's free order.
    seed : int, optional
        Seed of ``init="random"``.
    pins : dict, optional
        Hard pins ``{selector: values}`` (:mod:`sheaflinalg.sheaf.pins`), e.g.
        ``{"a1[2]": 0.5}`` or ``{"yhat": Y}`` (output pinned to labels).
    soft_pins : SoftPins or (targets, gamma), optional
        Penalty edges ``gamma/2 (s_j - p_j)^2``.
    reluctance : float or Reluctance, optional
        Reluctance edges on every free coordinate.
    record_every : int
        Record discord by edge block, per-sample discord and the output every
        this many steps (and at the last step); 0 records nothing.
    record_states : sequence of int, optional
        Samples whose full states are recorded as well.
    output_force : {"adjoint", "discrepancy"}
        Nonlinear output: ``J_phi^T (phi(z) - yhat)`` (eq. final-dynamics) or
        the plain discrepancy ``phi(z) - yhat``.
    reduced : bool, optional
        Use the reduced system (no output vertex).  Default: for identity
        output without pins on ``yhat``.
    crossings : bool
        Log sign changes of hidden pre-activations and sliding episodes.
    max_crossings : int
        Size of the crossing log (the count goes on past it).
    sliding_window, sliding_min_flips : int
        A sliding episode is ``>= sliding_min_flips`` flips of one coordinate,
        each within ``sliding_window`` steps of the previous one.
    check_stability : bool
        Refuse an unstable ``dt`` (default).  A NaN/Inf mid-run always raises
        :class:`NonFiniteStateError` naming the step.
    progress : bool
        tqdm progress bar for runs of more than 20000 steps.
    threads : int, optional
        Threads that share the batch's parts (the kernel releases the GIL);
        any positive integer, default :func:`sheaflinalg.get_num_threads`.
        A batch is cut into parts of at least 128 samples (at most 16 parts)
        by its size alone, so the result is the same bit for bit for any
        number of threads, and it is that of one run (stopping step, states,
        crossings, records; see :mod:`sheaflinalg.dynamics.parts`).
    method : {"euler", "exact"}
        ``"exact"`` integrates the continuous flow exactly, segment by segment
        between ReLU switches, with Filippov sliding on switching surfaces
        (:mod:`sheaflinalg.dynamics.exact`); identity output only (a nonlinear
        output is not piecewise affine and is refused).  It uses ``alpha``,
        ``tol`` (stop within ``tol`` of an equilibrium, Euclidean distance),
        ``init``, ``seed``, pins, soft pins, reluctance, ``reduced``, ``t_max``
        and ``max_events``; ``dt`` and the Euler-only options are ignored.
    t_max : float, optional
        ``method="exact"``: stop at this time (default: run to the equilibrium).
    max_events : int
        ``method="exact"``: largest number of events per sample (then it stops, not converged,
        with a ``RuntimeWarning``; ``stopped_at_max_events`` of the result marks those samples).

    Returns
    -------
    HeatResult
        :class:`~sheaflinalg.dynamics.exact_result.ExactHeatResult` for ``method="exact"``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> res = sl.heat(net, [0.5, -1.0], dt=0.05, tol=1e-13, seed=1)
    >>> res.converged, bool(np.allclose(res.output, net.forward([[0.5, -1.0]]), atol=1e-10))
    (True, True)
    """
    X, _ = as_samples(X, net.dims[0])
    M = X.shape[0]
    alpha = check_positive(alpha, "alpha")
    dt = check_positive(dt, "dt")
    max_steps = check_int(max_steps, "max_steps", 0)
    tol = check_tol(tol, "tol")
    check_seed(seed)
    threads = check_optional_int(threads, "threads")
    record_every = check_int(record_every, "record_every", 0)
    max_crossings = check_int(max_crossings, "max_crossings", 0)
    sliding_window = check_int(sliding_window, "sliding_window", 1)
    sliding_min_flips = check_int(sliding_min_flips, "sliding_min_flips", 2)
    threads = resolve_threads(threads)
    check_choice(output_force, OUTPUT_FORCES, "output_force")
    check_choice(method, METHODS, "method")
    if method == "exact":
        from .exact_heat import check_affine

        check_affine(net, reduced)
        t_max = np.inf if t_max is None else check_positive(t_max, "t_max")
        max_events = check_int(max_events, "max_events", 1)
    if reduced is None:
        reduced = net.output == "identity" and not (_pins.spec_mentions_output(pins)
                                                    or _pins.spec_mentions_output(soft_pins))
    if reduced and net.output != "identity":
        raise ValueError(f"reduced=True needs identity output (this network has {net.output!r})")
    lay = Layout(net.dims, reduced=bool(reduced))
    hard = _pins.resolve(lay, pins, M, what="pins")
    soft = _pins.resolve_soft(lay, soft_pins, M)
    _pins.check_disjoint(hard, soft)
    lam, anchor = _pins.resolve_reluctance(lay, reluctance, M)
    if record_states is None:
        rec_samples = np.zeros(0, dtype=np.int64)
    else:
        rec_samples = np.atleast_1d(np.asarray(record_states))
        if rec_samples.dtype.kind not in "iu" or rec_samples.ndim != 1 or \
                (rec_samples.size and (rec_samples.min() < 0 or rec_samples.max() >= M)):
            raise ValueError(f"record_states must be sample indices in [0, {M}), got {record_states!r}")
        rec_samples = rec_samples.astype(np.int64)
        if rec_samples.size and record_every == 0:
            raise ValueError("record_states needs record_every > 0")
    net.forward_states(X)  # refuses a network whose forward pass overflows, naming the layer
    bound = lambda_max_bound(net, soft.gamma.max() if soft.size else 0.0, lam)
    if not np.isfinite(bound):
        raise ValueError(f"the weights are too large: the bound on lambda_max(L[Omega,Omega]) overflows "
                         f"({bound}); no dt is stable")
    if method == "exact":
        from .exact_heat import heat_exact

        return heat_exact(net, X, _initial_columns(net, X, lay, init, seed, hard), lay, hard, soft, lam,
                          alpha, tol, t_max, max_events, threads)
    if check_stability and alpha * dt * bound >= 2.0:
        raise ValueError(
            f"dt={dt:g} is unstable for explicit Euler: alpha*dt*lambda_max must be < 2, and "
            f"lambda_max(L[Omega,Omega]) <= {bound:.6g} (norm bound (1 + max(1, ||W_l||_2))^2 "
            f"+ max gamma + lambda, valid for every activation pattern); the largest stable dt "
            f"is {2.0 / (alpha * bound):.6g} (pass check_stability=False to run anyway)")
    S = _initial_columns(net, X, lay, init, seed, hard)
    kpins = _parts.batch_pins(lay, hard, soft, lam, anchor, M)
    parts = _parts.build_parts(net, X, S, lay, kpins, output_force, alpha * dt, tol, record_every, rec_samples,
                               crossings, max_crossings, sliding_window, sliding_min_flips)

    show = progress and max_steps >= 20_000
    with progress_bar(max_steps, show, "heat", unit="step") as bar:
        status = _parts.run_parts(parts, max_steps, threads, record_every,
                                  max(10_000, max_steps // 100) if show else None, bar.update if show else None)
    if status == _kheat.STATUS_NONFINITE:
        step = _parts.nonfinite_step(parts)
        raise NonFiniteStateError(
            f"the state became non-finite (NaN or Inf) at Euler step {step} (dt={dt:g}, alpha={alpha:g}); "
            f"reduce dt (largest dt certified stable: {2.0 / (alpha * bound):.6g})")
    steps = parts[0].step
    # Each part's F holds the forces of its last step: the largest change is adt max|F| (monotone rounding).
    update_rows = kpins.update_rows
    final_change = alpha * dt * max(float(np.abs(p.F[update_rows]).max()) for p in parts) \
        if steps and update_rows.size else (0.0 if steps else float("inf"))
    for p in parts:
        p.finish()
    S = np.concatenate([p.S for p in parts], axis=1)
    E = np.concatenate([p.E for p in parts], axis=1)
    n_blocks = len(lay.edge_blocks)
    blk = np.zeros((n_blocks, M))
    _force.discord_by_edge_block(E, parts[0].lay, parts[0].edge, blk)
    disc = blk.sum(axis=0)
    if soft.size:
        disc += 0.5 * (soft.gamma[:, None] * (S[kpins.soft_rows] - kpins.soft_targets) ** 2).sum(axis=0)
    if lam > 0:
        disc += 0.5 * lam * ((S[update_rows] - kpins.rel_anchor[update_rows]) ** 2).sum(axis=0)
    history = None
    if record_every > 0:
        nr = int(parts[0].counters[_kheat.C_NREC])
        cols = list(range(n_blocks)) + ([n_blocks] if soft.size else []) + ([n_blocks + 1] if lam > 0 else [])
        states = np.zeros((nr, rec_samples.size, lay.n_free))
        for p in parts:
            states[:, p.rec_index] = p.rec.states[:nr]
        history = HeatHistory(
            steps=parts[0].rec.steps[:nr].copy(),
            discord=sum(p.rec.discord[:nr] for p in parts)[:, cols],
            labels=[b.name for b in lay.edge_blocks] + (["e_pin"] if soft.size else [])
            + (["e_rel"] if lam > 0 else []),
            sample_discord=np.concatenate([p.rec.sample_discord[:nr] for p in parts], axis=1),
            output=np.ascontiguousarray(
                np.concatenate([p.rec.output[:nr] for p in parts], axis=2).transpose(0, 2, 1)),
            states=states, state_samples=rec_samples, layout=lay)
    cross, n_cross = _parts.merged_crossings(parts, max_crossings if crossings else 0)
    sliding, n_sliding = _parts.merged_episodes(parts, parts[0].log.episodes.shape[0])
    out_rows = lay.free(lay.output_block)
    return HeatResult(
        state=to_rows(S), output=to_rows(S[out_rows]), steps=steps,
        converged=status == _kheat.STATUS_CONVERGED, final_change=final_change, discord=disc,
        edge_discrepancy=to_rows(E), history=history, crossings=cross, crossings_total=n_cross,
        sliding=sliding, sliding_total=n_sliding, layout=lay,
        pinned=list(hard.labels), lambda_max_bound=bound, dt=dt, alpha=alpha)
