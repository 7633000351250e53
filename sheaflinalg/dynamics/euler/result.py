"""What forward Euler returns: :class:`HeatResult` (with its :class:`HeatHistory`)."""

from dataclasses import dataclass

import numpy as np

from ...sheaf.edge_groups import group
from ...sheaf.layout import Layout
from ..result import FlowResult


class NonFiniteStateError(FloatingPointError, ValueError):
    """A NaN or Inf appeared in the state during a run (the message names the step)."""


@dataclass
class HeatHistory:
    """What :func:`~sheaflinalg.heat` recorded every ``record_every`` steps (and at the final step).

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
        """``{edge kind: (n_rec,) discord}``: ``weight``, ``activation``, ``output``, ``pin``, ``reluctance``
        (a graph network: the nodes' ops, e.g. ``conv``, ``relu``, then ``output``, ``pin``, ``reluctance``)."""
        return _grouped(self, "type")

    def by_layer(self):
        """``{layer: (n_rec,) discord}`` (layer of each edge block; ``pin``/``reluctance`` kept apart)."""
        return _grouped(self, "layer")


def _grouped(history, by):
    return group(history.discord, history.labels, by, history.layout)


@dataclass(kw_only=True, repr=False)
class HeatResult(FlowResult):
    """Result of :func:`~sheaflinalg.heat` with ``method="euler"`` (see :class:`~sheaflinalg.dynamics.result.FlowResult`
    for the fields every method has).

    Attributes
    ----------
    steps : int
        Euler steps taken.
    converged : bool
        The largest change of a free coordinate in the last step was below ``tol``.
    final_change : float
        That largest change.
    history : HeatHistory or None
    crossings : ndarray of int, shape (n, 5)
        ``(step, sample, layer, neuron, new_active)`` for every sign change of
        a hidden pre-activation: the mask ``z >= 0`` after Euler step ``step``
        (1-based) differs from the one before it; ``new_active`` is the new mask.
        On a graph network: ``(step, sample, layer, entry, new)`` for every pattern change
        (``layer`` the node's 1-based position, ``new`` the mask or the new max-pool argmax;
        :mod:`sheaflinalg.dynamics.euler.graph`).
    crossings_total : int
        Number of crossings (more than ``len(crossings)`` if the buffer filled).
    sliding : ndarray of int, shape (n, 6), or None
        Sliding episodes ``(sample, layer, neuron, first_step, last_step, n_flips)``,
        sorted by (first step, layer, neuron, sample); None on a graph network (not detected).
    sliding_total : int or None
        Number of sliding episodes (more than ``len(sliding)`` if the buffer filled).
    lambda_max_bound : float
    dt : float
    dts : ndarray of float, shape (steps,), or None
        A graph network with state-dependent nodes (:mod:`sheaflinalg.dynamics.euler.adaptive`): the step
        taken at every Euler step (``dt`` halved where the state needed it); None where ``dt`` is fixed.
    state_bounds : ndarray of float, shape (steps,), or None
        Those runs' bound on ``lambda_max`` at every step's state (``alpha * dts * state_bounds < 2``).
    """

    method = "euler"

    steps: int
    final_change: float
    history: object
    crossings: np.ndarray
    crossings_total: int
    sliding: np.ndarray
    sliding_total: int = 0
    lambda_max_bound: float = float("nan")
    dt: float = float("nan")
    dts: np.ndarray = None
    state_bounds: np.ndarray = None

    def __repr__(self):
        return (f"HeatResult(steps={self.steps}, converged={self.converged}, "
                f"final_change={self.final_change:.3g}, n_samples={self.state.shape[0]}, "
                f"crossings={self.crossings_total}, sliding_episodes={self.sliding_total})")
