"""What every method of :func:`~sheaflinalg.dynamics.heat.heat` returns: :class:`FlowResult`.

The Euler result (:class:`~sheaflinalg.dynamics.euler.result.HeatResult`) and the
exact flow's (:class:`~sheaflinalg.dynamics.exact.result.ExactHeatResult`) extend
it with what only their method has; a field means the same thing wherever it appears.
"""

from dataclasses import dataclass, field

import numpy as np

from ..sheaf.layout import Layout


@dataclass(kw_only=True, repr=False)
class FlowResult:
    """The final state of a heat run, whatever the method.

    Attributes
    ----------
    state : ndarray, shape (n_samples, n_free)
        Final free cochain, layout free order (pinned coordinates hold their pins).
    output : ndarray, shape (n_samples, n_out)
        Final output stalk (``yhat``; ``z(k+1)`` for identity output without output pins).
    converged : bool
        Every sample reached its stopping criterion (see the method's result).
    discord : ndarray, shape (n_samples,)
        Total discord of the final state.
    edge_discrepancy : ndarray, shape (n_samples, n_edges)
        ``E`` of the final state (edge order of the layout).
    layout : Layout
    pinned : list of str
        Labels of the hard-pinned coordinates.
    alpha : float
        Diffusion rate.
    method : str
        ``"euler"`` or ``"exact"`` (a class attribute).
    path : str
        Which engine ran: ``"chain"`` (the fused chain kernels) or ``"graph"``
        (:func:`~sheaflinalg.network.paths.engine`).
    """

    method = "flow"

    state: np.ndarray
    output: np.ndarray
    converged: bool
    discord: np.ndarray
    edge_discrepancy: np.ndarray
    layout: Layout
    pinned: list = field(default_factory=list)
    alpha: float = float("nan")
    path: str = None

    @property
    def n_samples(self):
        """Number of samples."""
        return int(self.state.shape[0])

    def block(self, name):
        """Final values of free block ``name`` (e.g. ``"a1"``), shape (n_samples, size)."""
        return self.state[:, self.layout.free(name)]
