"""Result of the exact heat flow: :class:`ExactHeatResult` (a :class:`~sheaflinalg.dynamics.result.FlowResult`
with the trajectory)."""

from dataclasses import dataclass, field

import numpy as np

from ..._common.validation import as_float64
from ...kernels.exact.structs import EVENT_KINDS
from ..result import FlowResult

EVENT_DTYPE = np.dtype([("time", "f8"), ("sample", "i8"), ("layer", "i8"), ("neuron", "i8"),
                        ("kind", "U13"), ("active", "?")])


@dataclass(kw_only=True, repr=False)
class ExactHeatResult(FlowResult):
    """Result of ``heat(..., method="exact")``: the exact piecewise-affine flow.

    Besides the fields of every method (:class:`~sheaflinalg.dynamics.result.FlowResult`;
    ``converged``: every sample came within ``tol`` of its equilibrium):

    Attributes
    ----------
    time : ndarray, shape (n_samples,)
        Where each sample stopped: within ``tol`` of its equilibrium, or ``t_max``.
    events : structured ndarray
        ``time, sample, layer, neuron, kind, active`` sorted by time (then sample);
        ``kind`` is ``crossing_up``, ``crossing_down``, ``sliding_start`` or
        ``sliding_end``; ``active`` is the unit's mask after the event.  A unit that
        slides from the start has a ``sliding_start`` event at time 0.
    episodes : ndarray of int, shape (n_episodes, 5)
        Sliding episodes ``(sample, layer, neuron, start event, end event or -1)`` (positions
        in ``events``), in the order of their start.
    final_distance : float
        Largest bound ``||omega(time) - omega*||`` of the certificate at the end (:meth:`certificate`).
    segments : sequence of segments
        Every sample's segments in time order (sample-major), made on demand
        (:class:`~sheaflinalg.dynamics.exact_krylov.SegmentList`).  Each has ``sample, start,
        end, active, sliding`` and ``states(t)`` (full states at times ``t``).
    final_pattern, final_sliding : list of ndarray of bool, (n_samples, n_l) per hidden layer
        Region of the last segment (a sliding unit sits at ``z = 0``: active by the ``z >= 0`` rule).
    switches, sliding_episodes : ndarray of int, shape (n_samples,)
        Crossings, and sliding episodes, of each sample.
    fixed_point : ndarray, shape (n_samples, n_free)
        Fixed point of the last region (the equilibrium when ``converged_samples``).
    converged_samples : ndarray of bool
    decay_rate : ndarray, shape (n_samples,)
        ``alpha lambda_1(L_final)`` of the last region's ``L_FF``.
    t_last : ndarray, shape (n_samples,)
        Time of the last event (0 without events).
    distance_last : ndarray, shape (n_samples,)
        ``||omega(t_last) - omega*||``: with ``decay_rate`` the certificate (:meth:`certificate`).
    cache_hits, cache_misses : int
        Segments whose region (pattern and sliding set) was met before in the run, and the
        number of distinct regions: ``lambda_1`` is computed once per distinct final region
        (the compiled engine needs no per-region decomposition; samples on the dense path
        share the decompositions of ``cache``).
    krylov_bound : float
        Largest a-posteriori bound ``2 beta_k ||g0|| / theta_min^2`` on the Krylov error of a
        segment's states (:mod:`sheaflinalg.kernels.exact`); ``beta_k <= 1e-12 ||T||`` at the grade.
    fallback_samples : ndarray of int
        Samples integrated by the Python path (more Krylov vectors than the cap): dense
        eigendecompositions, or ``expm_multiply`` for large networks.
    stopped_at_max_events : ndarray of bool, shape (n_samples,)
        Samples that ``max_events`` stopped before they converged (a ``RuntimeWarning`` says so).
    """

    method = "exact"

    time: np.ndarray = None
    episodes: np.ndarray = None
    final_distance: float = 0.0
    events: np.ndarray = None
    segments: list = field(default_factory=list)
    final_pattern: list = field(default_factory=list)
    final_sliding: list = field(default_factory=list)
    switches: np.ndarray = None
    sliding_episodes: np.ndarray = None
    fixed_point: np.ndarray = None
    converged_samples: np.ndarray = None
    decay_rate: np.ndarray = None
    t_last: np.ndarray = None
    distance_last: np.ndarray = None
    cache_hits: int = 0
    cache_misses: int = 0
    cache: object = None
    krylov_bound: float = 0.0
    fallback_samples: np.ndarray = None
    stopped_at_max_events: np.ndarray = None

    def __repr__(self):
        return (f"ExactHeatResult(n_samples={self.state.shape[0]}, converged={self.converged}, "
                f"time_max={float(self.time.max()):.6g}, segments={len(self.segments)}, "
                f"events={len(self.events)}, switches={int(self.switches.sum())}, "
                f"sliding_episodes={int(self.sliding_episodes.sum())})")

    @property
    def n_events(self):
        """Number of events of all samples."""
        return len(self.events)

    def __post_init__(self):
        segs = self.segments
        samples = segs.samples if hasattr(segs, "samples") else np.array([sg.sample for sg in segs], np.int64)
        starts = segs.starts if hasattr(segs, "starts") else np.array([sg.start for sg in segs])
        bounds = np.searchsorted(samples, np.arange(self.state.shape[0] + 1))   # sample-major
        self._first, self._starts = bounds, starts

    def _segment_index(self, sample, ts):
        """Position in ``segments`` of the segment of ``sample`` holding each time of ``ts``."""
        lo, hi = self._first[sample], self._first[sample + 1]
        return lo + np.maximum(np.searchsorted(self._starts[lo:hi], ts, side="right") - 1, 0)

    def sol(self, t, sample=None):
        """Exact state at time(s) ``t`` (scipy ``solve_ivp`` dense-output convention: time last).

        Parameters
        ----------
        t : float or array_like
            Times in ``[0, time]``; beyond ``time`` only for converged samples (the
            last region's flow, valid forever).
        sample : int, optional
            One sample: shape ``(n_free,)`` or ``(n_free, n_t)``.  Default every
            sample: ``(n_samples, n_free)`` or ``(n_samples, n_free, n_t)``.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> net = sl.Network.random([2, 4, 1], seed=0)
        >>> ex = sl.heat(net, [0.5, -1.0], method="exact", seed=1)
        >>> ex.sol(0.5).shape, ex.sol([0.0, 1.0], sample=0).shape
        ((1, 9), (9, 2))
        """
        scalar = np.ndim(t) == 0
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        if ts.ndim != 1 or not np.all(np.isfinite(ts)) or (ts.size and ts.min() < 0):
            raise ValueError(f"sol: t must be finite times >= 0, got {t!r}")
        samples = range(self.state.shape[0]) if sample is None else [self.check_sample(sample)]
        out = np.empty((len(samples), self.state.shape[1], ts.size))
        for i, s in enumerate(samples):
            if not self.converged_samples[s] and ts.size and ts.max() > self.time[s] * (1 + 1e-15):
                raise ValueError(f"sol: sample {s} stopped at t={self.time[s]:.6g} without converging; "
                                 f"t={ts.max():.6g} is beyond its end")
            where = self._segment_index(s, ts)
            for g in np.unique(where):
                sel = where == g
                out[i, :, sel] = self.segments[int(g)].states(ts[sel])
        out = out[:, :, 0] if scalar else out
        return out[0] if sample is not None else out

    def segments_of(self, sample):
        """Segments of one sample, in time order."""
        s = self.check_sample(sample)
        return [self.segments[i] for i in range(self._first[s], self._first[s + 1])]

    def check_sample(self, sample):
        """``sample`` as an int, or ValueError naming the valid range."""
        M = self.state.shape[0]
        if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or not 0 <= sample < M:
            raise ValueError(f"sample must be an integer in [0, {M}), got {sample!r}")
        return int(sample)

    def certificate(self, t):
        """Bound ``||omega(t) - omega*|| <= ||omega(t_last) - omega*|| exp(-decay_rate (t - t_last))``.

        Parameters
        ----------
        t : float or array_like, shape (n_samples,)
            One time for every sample, or each sample's own time; finite, and at or after the
            sample's last event ``t_last`` (before it the bound does not hold).

        Returns
        -------
        ndarray, shape (n_samples,)

        Examples
        --------
        >>> import sheaflinalg as sl
        >>> ex = sl.heat(sl.Network.random([2, 4, 1], seed=0), [[0.5, -1.0], [1.0, 1.0]], method="exact", seed=1)
        >>> ex.certificate(ex.time).shape
        (2,)
        >>> ex.certificate([1.0, 2.0, 3.0])
        Traceback (most recent call last):
        ...
        ValueError: certificate: t must be one time or one per sample (shape (2,)), got shape (3,)
        """
        ts = as_float64(t, "certificate: t")
        ts = ts.reshape(()) if np.ndim(t) == 0 else ts         # as_float64 makes a scalar 1-D
        M = self.t_last.shape[0]
        if ts.shape not in ((), (M,)):
            raise ValueError(f"certificate: t must be one time or one per sample (shape ({M},)), got shape {ts.shape}")
        early = np.flatnonzero(np.broadcast_to(ts, (M,)) < self.t_last)
        if early.size:
            s = int(early[0])
            raise ValueError(f"certificate: the bound holds from each sample's last event on; sample {s}'s is at "
                             f"t_last={self.t_last[s]:.6g}, after t={np.broadcast_to(ts, (M,))[s]:.6g}")
        return self.distance_last * np.exp(-self.decay_rate * (ts - self.t_last))

    def event_kind_counts(self):
        """``{kind: number of events}``."""
        return {k: int(np.sum(self.events["kind"] == k)) for k in EVENT_KINDS}
