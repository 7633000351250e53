"""The figure of a survey (:func:`sheaflinalg.survey`): its per-input values by true class and by outcome."""

import numpy as np

from .case_study import plot_groups
from .figure import new_figure

#: ``(value, axis label, scale)`` of the rows of :func:`plot_survey`; discord is 0 on correct inputs: symlog.
ROWS = (("lambda_min", r"$\lambda_{\min}$", "log"), ("condition", r"condition $\lambda_{\max}/\lambda_{\min}$", "log"),
        ("discord_total", r"pinned discord $\frac{1}{2}\|r\|^2$", "symlog"))


def plot_survey(result):
    """A figure of box plots: one row per value the survey computed (``lambda_min``, the condition number,
    the total pinned discord), by true class (left; the discord of the wrong inputs) and by outcome (right).

    ``result`` is a :class:`sheaflinalg.SurveyResult` (or any object with its ``groups``, ``n_inputs`` and
    value arrays).  The figure is not attached to pyplot: the user's backend is untouched.

    Examples
    --------
    >>> import os, tempfile, numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.plotting.survey import plot_survey
    >>> db = os.path.join(tempfile.mkdtemp(), "s.db")
    >>> s = sl.survey(sl.Network.random([2, 4, 2], seed=0), np.ones((3, 2)), [0, 1, 1], store=db, progress=False)
    >>> len(plot_survey(s).axes)
    6
    """
    rows = [r for r in ROWS if np.any(np.isfinite(getattr(result, r[0])))]
    if not rows:
        raise ValueError("the survey has no finished input with a spectrum or a discord to plot")
    fig, axes = new_figure(len(rows), 2, figsize=(13, 3.2 * len(rows)), squeeze=False,
                           gridspec_kw={"width_ratios": [3, 1]})
    for (value, label, scale), (left, right) in zip(rows, axes):
        for ax, by, colours in ((left, "class", None), (right, "outcome", ("C0", "C3"))):
            only = ~result.correct if scale == "symlog" and by == "class" else None    # correct inputs: 0
            groups = {k: v[np.isfinite(v)] for k, v in result.groups(value, by=by, only=only).items()}
            plot_groups(groups, ax=ax, log=False, ylabel=label if by == "class" else None, colours=colours)
            if scale == "log" and all(np.all(v > 0) for v in groups.values()):
                ax.set_yscale("log")
            elif scale == "symlog":
                positive = np.concatenate([v[v > 0] for v in groups.values()] + [np.ones(1)])
                ax.set_yscale("symlog", linthresh=float(positive.min()))
                ax.set_ylim(bottom=0.0)
        if scale == "symlog":
            left.set_xlabel("true class (wrong inputs)")
        right.set_ylim(left.get_ylim())
    axes[0, 0].set_title(f"by true class ({result.n_inputs} inputs)")
    axes[0, 1].set_title("by outcome")
    fig.tight_layout()
    return fig
