"""Studies built on the exact heat flow: Euler's convergence to it, and switch statistics."""

from dataclasses import dataclass

import numpy as np

from .._common.validation import as_samples, check_positive, check_seed
from ..network.model import check_network
from .exact.result import ExactHeatResult
from .exact.settings import check_affine
from .heat import heat


@dataclass
class ConvergenceStudy:
    """Result of :func:`convergence_study`.

    Attributes
    ----------
    dts : ndarray
    times : ndarray
    errors : ndarray, shape (n_dt, n_times)
        ``max_s ||omega_euler(t) - omega_exact(t)||_inf`` at each fixed time.
    slope : float
        Least-squares slope of ``log(max_t error)`` against ``log(dt)`` (1 for first order).
    exact : ExactHeatResult
    """

    dts: np.ndarray
    times: np.ndarray
    errors: np.ndarray
    slope: float
    exact: object

    def table(self):
        """Markdown table: one row per ``dt``, one column per time."""
        head = "| dt | " + " | ".join(f"t = {t:g}" for t in self.times) + " |"
        rows = [head, "|" + "---|" * (len(self.times) + 1)]
        rows += [f"| {dt:g} | " + " | ".join(f"{e:.3e}" for e in err) + " |" for dt, err in zip(self.dts, self.errors)]
        return "\n".join(rows + [f"\nslope: {self.slope:.3f}"])


def convergence_study(net, X, dts=(0.04, 0.02, 0.01, 0.005), times=(0.4, 0.8, 1.6), alpha=1.0, seed=0,
                      pins=None, soft_pins=None, reluctance=None):
    """Forward Euler at several ``dt`` against the exact flow, at fixed times.

    Every run starts from the same random state (``seed``); ``times`` must be
    multiples of every ``dt``.  ``pins``, ``soft_pins`` and ``reluctance``
    (as in :func:`~sheaflinalg.heat`) go to both integrators.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> st = convergence_study(net, [[0.5, -1.0]], dts=(0.02, 0.01), times=(1.0,))
    >>> 0.7 < st.slope < 1.3
    True
    """
    check_network(net, feature="sl.convergence_study")
    X, _ = as_samples(X, net.dims[0])
    dts, times = _positive_values(dts, "dts"), _positive_values(times, "times")
    alpha = check_positive(alpha, "alpha")
    check_seed(seed)
    check_affine(net)
    steps = np.rint(times[None, :] / dts[:, None]).astype(np.int64)
    if not np.allclose(steps * dts[:, None], times[None, :], rtol=1e-9, atol=0):
        raise ValueError(f"times {times.tolist()} must be multiples of every dt in {dts.tolist()}")
    pin_args = dict(pins=pins, soft_pins=soft_pins, reluctance=reluctance)
    ex = heat(net, X, alpha=alpha, seed=seed, method="exact", **pin_args)
    init = ex.sol(0.0)                  # the same random start (and layout) for every Euler run
    ref = np.stack([ex.sol(t) for t in times])
    errors = np.zeros((dts.size, times.size))
    for i, dt in enumerate(dts):
        for j, n in enumerate(steps[i]):
            eu = heat(net, X, alpha=alpha, dt=dt, max_steps=int(n), tol=0.0, init=init, progress=False, **pin_args)
            errors[i, j] = np.abs(eu.state - ref[j]).max()
    slope = float(np.polyfit(np.log(dts), np.log(errors.max(axis=1)), 1)[0]) if dts.size > 1 else float("nan")
    return ConvergenceStudy(dts=dts, times=times, errors=errors, slope=slope, exact=ex)


def _positive_values(values, name):
    """A non-empty 1-D sequence of positive finite numbers as an array (ValueError naming ``name`` otherwise)."""
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of positive numbers, got {values!r}") from None
    if not items:
        raise ValueError(f"{name} must hold at least one positive number, got {values!r}")
    return np.array([check_positive(v, name) for v in items])


def switch_statistics(result):
    """Switch statistics of an exact run over its inputs, as a markdown table.

    Per sample: crossings before the final region, sliding episodes, events,
    final-region decay rate.  Returns ``(table, summary)`` with ``summary`` a
    dict of means and maxima.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> ex = sl.heat(net, np.random.default_rng(0).uniform(-2, 2, (5, 2)), method="exact", seed=1)
    >>> table, summary = switch_statistics(ex)
    >>> summary["samples"]
    5
    """
    if not isinstance(result, ExactHeatResult):
        raise TypeError(
            "switch_statistics needs the result of heat(..., method='exact') (an ExactHeatResult), got "
            f"{type(result).__name__}" + (" of method='euler': its crossings and sliding tables log the Euler "
                                         "steps' sign changes" if getattr(result, "method", None) == "euler" else ""))
    sw, ep = result.switches, result.sliding_episodes
    ev = np.bincount(result.events["sample"], minlength=sw.size) if len(result.events) else np.zeros_like(sw)
    summary = dict(samples=int(sw.size), mean_switches=float(sw.mean()), max_switches=int(sw.max()),
                   mean_sliding=float(ep.mean()), max_sliding=int(ep.max()),
                   sliding_samples=int(np.sum(ep > 0)), mean_events=float(ev.mean()),
                   min_decay_rate=float(result.decay_rate.min()), converged=int(result.converged_samples.sum()))
    rows = ["| quantity | mean | max |", "|---|---|---|",
            f"| crossings before the final region | {sw.mean():.2f} | {sw.max()} |",
            f"| sliding episodes | {ep.mean():.2f} | {ep.max()} |",
            f"| events | {ev.mean():.2f} | {ev.max()} |",
            f"| decay rate alpha lambda_1(L_final) | {result.decay_rate.mean():.4g} | {result.decay_rate.max():.4g} |",
            f"\n{summary['sliding_samples']} of {sw.size} inputs slide at least once; "
            f"{summary['converged']} converged."]
    return "\n".join(rows), summary
