"""Figures of parameter sweeps: a metric against a parameter, one line per value of another."""

import difflib
import json

import numpy as np

from .figure import axes_or_new


def plot_sweep(rows, x, y, hue=None, ax=None, logx=None, logy=None, mark=None):
    """Mean and standard deviation of ``y`` over the runs that share ``x`` (and ``hue``).

    Parameters
    ----------
    rows : list of dict
        Runs with parameters and metrics as keys (``sl.sweep.load(db, records=False)`` without
        pandas, or ``DataFrame.to_dict("records")``).
    x, y, hue : str
        Parameter on the x axis, metric on the y axis, parameter that separates the lines.
    logx, logy : bool, optional
        Log scales (default: when the values are positive and span more than a factor of 20).
    mark : float, optional
        Draw a dashed vertical line at this x (e.g. the default ``beta * M = 1``).

    Examples
    --------
    >>> from sheaflinalg.plotting.sweep import plot_sweep
    >>> rows = [{"beta": b, "n_train": m, "loss": b * m} for b in (0.1, 1.0) for m in (10, 20)]
    >>> ax = plot_sweep(rows, "beta", "loss", hue="n_train")
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['n_train = 10', 'n_train = 20']
    """
    columns = {k for r in rows for k in r}
    for option, name in (("x", x), ("y", y), ("hue", hue)):
        if name is not None and name not in columns:
            close = difflib.get_close_matches(str(name), sorted(columns), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the runs have {', '.join(sorted(columns))}"
            raise ValueError(f"{option}: no column {name!r}; {hint}")
        bad = next((r[name] for r in rows if isinstance(r.get(name), (str, list, dict)) and option != "hue"), None)
        if bad is not None:
            raise ValueError(f"{option}: the column {name!r} holds {bad!r}; the {option} axis needs numbers (use it as --hue)")
    rows = [r for r in rows if r.get(y) is not None and r.get(x) is not None and r.get("status", "done") == "done"]
    if not rows:
        raise ValueError(f"no finished run has both {x!r} and {y!r}")
    ax = axes_or_new(ax, figsize=(6, 4))
    groups = sorted({json.dumps(r.get(hue)) for r in rows}, key=_hue_order) if hue else [None]
    for i, g in enumerate(groups):
        g = None if g is None else json.loads(g)
        sel = [r for r in rows if hue is None or r.get(hue) == g]
        xs = sorted({r[x] for r in sel})
        vals = [np.array([r[y] for r in sel if r[x] == v], dtype=float) for v in xs]
        mean, std = np.array([v.mean() for v in vals]), np.array([v.std() for v in vals])
        label = f"{hue} = {g}" if hue else None
        ax.errorbar(xs, mean, yerr=std, marker="o", ms=4, capsize=2, color=f"C{i}", label=label)
    for axis, values, flag in (("x", [r[x] for r in rows], logx), ("y", [r[y] for r in rows], logy)):
        v = np.asarray(values, dtype=float)
        if flag or (flag is None and np.all(v > 0) and v.max() > 20 * v.min()):
            getattr(ax, f"set_{axis}scale")("log")
    if mark is not None:
        ax.axvline(mark, color="k", linestyle="--", linewidth=1)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if hue:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def _hue_order(text):
    """Sort key of a ``hue`` value (as JSON): numbers in order, then other values by their text, None last."""
    value = json.loads(text)
    number = isinstance(value, (int, float))
    return value is None, not number, value if number else 0, text
