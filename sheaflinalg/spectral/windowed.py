"""``lambda_max`` of a large convolutional network's ``L`` from many small principal problems at once.

The top of ``L = delta^T delta`` of a convolutional network can be a cluster of modes each living on
one pixel (ResNet-50: one per pixel of ``layer2``, the largest two 6.4e-6 relative apart), which a
Lanczos recurrence from a random start separates only at a rate set by that gap.  Started on the
right pixel the recurrence needs a few dozen products; started on another it converges to that
pixel's smaller value.  :class:`WindowedLargest` finds the pixel first, by Cauchy interlacing:

1. **Windows** (:mod:`~sheaflinalg.spectral.window_tiling`): the coordinates of the nodes no coarser
   than ``level`` input pixels, cut into cells; a tiling keeps every ``period``-th cell per axis.
   The tiling's windows are *checked* to be separated (no entry of ``L`` between two of them), one
   product per colour of the windows (random values on the windows of one colour must leave the
   others exactly zero, almost surely only if no entry couples them); ``period`` grows until they are.
2. **Independent recurrences**: ``L_WW`` of the union ``W`` of a tiling's windows is then block
   diagonal, so one product ``L x``, read back on each window, advances one Lanczos recurrence per
   window (each with its own coefficients).  Each stops at the relative Ritz estimate
   :data:`WINDOW_TOL`.  Every window's value is at most ``lambda_max(L)`` (interlacing).
3. **Refinement**: the plain recurrence on the whole ``L``
   (:class:`~sheaflinalg.spectral.lanczos.LargestLanczos`, the unchanged stopping rule) started from the
   Ritz vector of the window with the largest value.  Its first coefficient is that vector's
   Rayleigh quotient on the whole ``L``: a rigorous lower bound of ``lambda_max`` (whatever the
   windows), and the result is an eigenvalue of ``L`` within the rule, at least that bound.
4. **Cross-check**: :data:`CHECK_STEPS` steps of the plain recurrence from the usual random start.
   Its Ritz values are lower bounds of ``lambda_max``: if one exceeds the result by more than
   ``tol``, the windows missed the top and that recurrence runs on to its own stopping rule (the
   result is then the plain path's, bit for bit).

What is guaranteed: the lower bound; the result is an eigenvalue of ``L`` (residual within the rule);
it is ``lambda_max`` up to the windows' truncation: if ``lambda_max``'s eigenvector has a fraction
``eps`` of its squared norm outside the window holding most of it, the window's value is at least
``lambda_max (1 - 2 eps) / (1 - eps)``, so the result is at most about ``eps lambda_max`` below it.
The refined vector's own outside fraction is at most ``1 - s_1**2`` (its cosine with the window's
start), reported as :attr:`WindowReport.truncation`: the measured size of that ``eps`` for the
mode found.
"""

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import eigh_tridiagonal

from .._common.validation import check_int
from .lanczos import LargestLanczos
from .window_tiling import cells, tilings, window_level

#: The windows' recurrences stop at this relative Ritz estimate: the eigenvalue error is about its
#: square times ``theta`` over the window's gap, far below the pixels' differences.
WINDOW_TOL = 1e-5
#: At most this many products per tiling.
WINDOW_MAX_STEPS = 120
#: Steps of the random-start cross-check.
CHECK_STEPS = 30
#: An entry of a probe's product counts as a coupling above this fraction of the product's largest.
COUPLING_FLOOR = 1e-13
#: Vectors of size ``N`` that ``method="windows"`` counts for in :func:`~sheaflinalg.spectrum`'s memory estimate:
#: the refinement's and the cross-check's recurrences (four each), the windows' vectors and their history (a
#: tiling holds a ninth of the coordinates or less, its history in float32).
WINDOW_VECTORS = 16


#: The phases whose products :class:`WindowReport` counts.
PHASES = ("probe", "windows", "refine", "check", "fallback")


@dataclass
class WindowReport:
    """What :class:`WindowedLargest` did and what its value is guaranteed to be.

    Attributes
    ----------
    value : float
        The eigenvalue reported as ``lambda_max``.
    lower_bound : float
        The Rayleigh quotient of the best window's Ritz vector on the whole ``L``: ``<= lambda_max``.
    window_value : float
        The largest window value (``<= lambda_max`` when the windows are separated).
    truncation : float
        ``1 - s_1**2`` of the refined Ritz vector: a bound on its squared norm outside the window.
    period, tilings, windows : int
        The tilings' period (cells per axis), how many tilings, how many windows in all.
    products : dict
        Products with ``L`` by phase: ``probe``, ``windows``, ``refine``, ``check``, ``fallback``.
    fallback : bool
        Whether the random-start recurrence found a larger Ritz value and gave the result.
    """

    value: float = float("nan")
    lower_bound: float = float("nan")
    window_value: float = float("nan")
    truncation: float = float("nan")
    period: int = 0
    tilings: int = 0
    windows: int = 0
    products: dict = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    fallback: bool = False


def _drive(problem, stop=None):
    """Serve ``problem``'s requests (yield them) until it is done or ``stop()``; return the pending one."""
    while (request := problem.request()) is not None:
        if stop is not None and stop():
            return request
        yield request
    return None


class WindowedLargest:
    """The largest eigenpair of ``L`` by windows, refinement and a cross-check (module docstring).

    The reverse-communication protocol of :class:`~sheaflinalg.spectral.lanczos.LargestLanczos`
    (``request()``, ``result()``), so that it runs in lockstep with ARPACK's ``lambda_min`` problem.

    Parameters
    ----------
    n : int
    tol, maxiter, v0, vector
        As for :class:`~sheaflinalg.spectral.lanczos.LargestLanczos` (``v0``: the cross-check's start).
    cells : Cells or None
        The windows' cells (:func:`~sheaflinalg.spectral.window_tiling.cells`); None or none: the
        cross-check's recurrence runs to its end alone.
    seed : int
        Seed of the windows' start vectors and probes.

    Attributes
    ----------
    report : WindowReport
    tilings : list of Tiling
        The tilings whose windows ran (empty without windows).
    """

    def __init__(self, n, tol, maxiter, v0, vector, cells, seed=0):
        self.n, self.tol, self.maxiter, self.v0, self.vector = n, tol, maxiter, v0, vector
        self.cells = cells
        self.report = WindowReport()
        self.tilings = []
        self._rng = np.random.default_rng(seed)
        self._y = np.empty(n)
        self._final = None
        self._phase_count = 0
        self._steps = self._run()

    def request(self):
        """``(x, y)``: write ``L x`` into ``y``; None once the eigenvalue is found."""
        request = next(self._steps, None)
        if request is not None:
            self._phase_count += 1
        return request

    def result(self):
        """As :meth:`LargestLanczos.result` of the recurrence that gave the value."""
        return self._final.result()

    def _counted(self, phase, steps):
        """Run the generator ``steps`` as phase ``phase``, adding its products to the report."""
        self._phase_count = 0
        try:
            return (yield from steps)
        finally:
            self.report.products[phase] += self._phase_count
            self._phase_count = 0

    def _run(self):
        """The phases in turn, as a generator of requests (module docstring)."""
        best = None
        if self.cells is not None and self.cells.coords.size:
            period, plans = yield from self._counted("probe", self._separated_tilings())
            self.tilings = plans
            self.report.period, self.report.tilings = period, len(plans)
            self.report.windows = sum(t.count for t in plans)
            for tiling in plans:
                found = yield from self._counted("windows", self._windows(tiling))
                if best is None or found[0] > best[0]:
                    best = found
        if best is not None:
            self.report.window_value = best[0]
            start = np.zeros(self.n)
            start[best[1]] = best[2]
            refine = LargestLanczos(self.n, self.tol, self.maxiter, start, self.vector)
            yield from self._counted("refine", _drive(refine))
            self.report.lower_bound = refine.first_alpha
            self.report.truncation = 1.0 - refine.start_overlap ** 2
            self._final = refine
        check = LargestLanczos(self.n, self.tol, self.maxiter, self.v0, self.vector)
        pending = yield from self._counted("check", _drive(check, lambda: check.steps >= CHECK_STEPS
                                                           or not check.building))
        if best is None or check.theta > self._final.theta * (1.0 + self.tol):
            self.report.fallback = True
            if pending is not None:
                yield from self._counted("fallback", self._resumed(pending, check))
            self._final = check
        self.report.value = float(self._final.theta)

    def _resumed(self, pending, problem):
        yield pending
        yield from _drive(problem)

    def _separated_tilings(self):
        """``(period, tilings)``: the smallest period from 2 whose tilings all have separated windows."""
        period = 2
        while True:
            plans = tilings(self.cells, period)
            if all(t.count == 1 for t in plans):
                return period, plans
            separated = True
            for tiling in plans:
                separated = yield from self._probe(tiling)
                if not separated:
                    break
            if separated:
                return period, plans
            period += 1

    def _probe(self, tiling):
        """Whether random values on the windows of each colour leave the tiling's other windows at zero."""
        colour = tiling.parity[tiling.window]
        for c in np.unique(tiling.parity):
            on = colour == c
            x = np.zeros(self.n)
            x[tiling.coords[on]] = self._rng.standard_normal(int(on.sum()))
            yield x, self._y
            seen = self._y[tiling.coords[~on]]
            if seen.size and np.max(np.abs(seen)) > COUPLING_FLOOR * np.max(np.abs(self._y)):
                return False
        return True

    def _windows(self, tiling):
        """One Lanczos recurrence per window, one product per step; ``(value, coordinates, Ritz vector)``
        of the window with the largest value."""
        recurrences = _WindowRecurrences(tiling, self._rng)
        x = np.zeros(self.n)
        while recurrences.active.any() and recurrences.steps < WINDOW_MAX_STEPS:
            x[tiling.coords] = recurrences.q
            yield x, self._y
            recurrences.absorb(self._y[tiling.coords])
        return recurrences.best()


class _WindowRecurrences:
    """The Lanczos recurrences of a tiling's windows, each on its own part of one vector."""

    def __init__(self, tiling, rng):
        self.tiling = tiling
        q = rng.standard_normal(tiling.coords.size)
        self.q = q / self._norms(q)[tiling.window]
        self.q_prev = np.zeros_like(q)
        self.beta_prev = np.zeros(tiling.count)
        self.alphas, self.betas, self.history = [], [], []
        self.active = np.ones(tiling.count, dtype=bool)
        self.length = np.zeros(tiling.count, dtype=np.int64)
        self.theta = np.zeros(tiling.count)
        self.steps = 0

    def _norms(self, v):
        return np.sqrt(np.bincount(self.tiling.window, v * v, minlength=self.tiling.count))

    def absorb(self, w):
        """One step of every active window from ``w = (L q)`` on the tiling's coordinates."""
        window = self.tiling.window
        alpha = np.bincount(window, self.q * w, minlength=self.tiling.count)
        w = w - alpha[window] * self.q - self.beta_prev[window] * self.q_prev
        beta = self._norms(w)
        self.alphas.append(alpha)
        self.betas.append(beta)
        self.history.append(self.q.astype(np.float32))
        self.steps += 1
        for i in np.flatnonzero(self.active):
            self.length[i] += 1
            theta, s = self._ritz(i)
            self.theta[i] = theta
            if beta[i] * abs(s[-1]) <= WINDOW_TOL * theta:
                self.active[i] = False
        scale = np.divide(1.0, beta, out=np.zeros_like(beta), where=self.active & (beta > 0))
        self.q_prev, self.q = self.q, w * scale[window]
        self.beta_prev = beta

    def _ritz(self, i):
        m = self.length[i]
        alpha = np.array([a[i] for a in self.alphas[:m]])
        beta = np.array([b[i] for b in self.betas[:m - 1]])
        theta, s = eigh_tridiagonal(alpha, beta, select="i", select_range=(m - 1, m - 1))
        return float(theta[0]), s[:, 0]

    def best(self):
        """``(value, coordinates, Ritz vector)`` of the window of the largest value."""
        i = int(np.argmax(self.theta))
        _, s = self._ritz(i)
        on = self.tiling.window == i
        u = sum(s_j * q[on].astype(np.float64) for s_j, q in zip(s, self.history))
        return float(self.theta[i]), self.tiling.coords[on], u / np.linalg.norm(u)


def window_problems(graph, layout, vector, level=None):
    """``(make, reports)``: ``make(n, tol, maxiter, v0)`` gives a :class:`WindowedLargest` for each system
    (the ``lanczos`` of :func:`~sheaflinalg.spectral.arpack_pair.largest_pairs`) and appends its report to
    ``reports``.

    Parameters
    ----------
    graph : Graph
    layout : Layout
    vector : bool
        Also the eigenvector.
    level : int, optional
        Cell side in input pixels; default :func:`~sheaflinalg.spectral.window_tiling.window_level`
        (no node laid out like the input: no windows, the cross-check's recurrence gives the value).
    """
    level = window_level(graph) if level is None else level
    found = cells(graph, layout, level) if level is not None else None
    reports = []

    def make(n, tol, maxiter, v0):
        problem = WindowedLargest(n, tol, maxiter, v0, vector, found)
        reports.append(problem.report)
        return problem
    return make, reports


def check_windows(method, graph, k, pinned, window):
    """``method="windows"`` needs a graph network (``graph``), ``k=1`` and no pins; ``window`` goes with it only."""
    if method != "windows":
        if window is not None:
            raise ValueError("window= is the windows' cell side: it needs method='windows'")
        return
    if not graph:
        raise ValueError("method='windows' needs a graph network (an MLP has no pixels); use 'arpack'")
    if k != 1:
        raise ValueError(f"method='windows' finds lambda_max alone: it needs k=1, got k={k}")
    if pinned:
        raise ValueError("method='windows' does not take pins, soft_pins or reluctance; use 'arpack'")
    if window is not None:
        check_int(window, "window", 1)
