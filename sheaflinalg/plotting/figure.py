"""The one figure helper of every plotting module: new figures, one resolution, atomic saving.

Figures are :class:`matplotlib.figure.Figure` objects drawn by the Agg renderer and created
without :mod:`matplotlib.pyplot`: the library never selects a backend (no ``matplotlib.use``),
never changes ``rcParams`` and leaves no figure open in pyplot's list of figures, so that nothing
accumulates however many figures a program draws.  A returned figure shows in a notebook as it
is and saves with :func:`save_figure` (or ``fig.savefig``); to draw into a window of your own,
pass ``ax=`` (an axes of ``plt.subplots()``) to the plotting functions that take one.
"""

from .._common.atomic import save_figure as _save_atomic

DPI = 150                 # every saved figure (PNG); vector formats (PDF, SVG) ignore it


def new_figure(nrows=1, ncols=1, figsize=(5, 3.5), layout=None, **subplots):
    """``(fig, axes)``: a new figure of ``figsize`` inches with ``Figure.subplots(nrows, ncols, **subplots)``.

    Examples
    --------
    >>> fig, axes = new_figure(1, 2, figsize=(8, 3), sharey=True)
    >>> len(fig.axes), type(fig.canvas).__name__
    (2, 'FigureCanvasAgg')
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout=layout)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **subplots)


def axes_or_new(ax, figsize=(5, 3.5)):
    """``ax`` when given, else the axes of a new one-panel figure of ``figsize`` inches."""
    return ax if ax is not None else new_figure(figsize=figsize)[1]


def save_figure(fig, path, name="path"):
    """Write ``fig`` to ``path`` atomically at :data:`DPI`, cropped to its content.

    The format follows the extension (``.png``, ``.pdf``, ``.svg``; PNG without one); a temporary
    file beside the target is renamed over it, so an interrupted save leaves nothing half-written.

    Examples
    --------
    >>> import os, tempfile
    >>> fig, ax = new_figure()
    >>> _ = ax.plot([0, 1], [1, 0])
    >>> path = os.path.join(tempfile.mkdtemp(), "line.png")
    >>> save_figure(fig, path)
    >>> os.path.getsize(path) > 1000
    True
    """
    _save_atomic(fig, path, name, dpi=DPI, bbox_inches="tight")


def finish(ax, path=None, **legend):
    """Draw ``ax``'s legend (small font) and write its figure to ``path`` if given; returns ``ax``."""
    ax.legend(fontsize=8, **legend)
    if path is not None:
        save_figure(ax.figure, path)
    return ax
