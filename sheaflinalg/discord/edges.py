"""Per-edge discord: ``1/2 ||(delta omega_bar)_e||^2`` by edge, edge block, edge type and layer.

Two sources give the same numbers: the kernels' ``E`` array (edge
discrepancies in the free-row order, see :mod:`sheaflinalg.kernels.force`)
and an assembled system (``delta_free @ omega + delta_boundary @ u +
edge_offset``).  Labels come from the :class:`~sheaflinalg.sheaf.layout.Layout`.

The kind and layer of an edge block, and sums by either, are the sheaf's
(:mod:`sheaflinalg.sheaf.edge_groups`); :func:`group_history` applies them to
a heat run's recorded discord.
"""

from .._common.validation import as_float64
from ..sheaf.assembled.augmented import AugmentedSheafSystem
from ..sheaf.edge_groups import group
from ..sheaf.assembled.system import check_system

__all__ = ["edge_discrepancies", "discord_by_block", "edge_kind", "edge_layer", "group", "group_history",
           "pinned", "PinnedDiscord", "residuals", "EdgeResiduals"]


def edge_discrepancies(system, free):
    """Edge discrepancies of an assembled system at the free cochain ``free``.

    Parameters
    ----------
    system : SheafSystem or AugmentedSheafSystem
    free : array_like, shape (n_samples, n_free_per_sample)
        Free coordinates of each sample, in the system's free order.

    Returns
    -------
    ndarray, shape (n_samples, n_edges_per_sample)
        ``delta_free @ omega + delta_boundary @ u + edge_offset`` per sample
        (the linearised output edge for a nonlinear output).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> s = sl.assemble(net, [[0.5, -1.0]])
    >>> h = sl.harmonic_extension(net, [[0.5, -1.0]])
    >>> float(abs(edge_discrepancies(s, h.free)).max()) < 1e-12
    True
    """
    check_system(system)
    M = system.n_samples
    n = system.delta_free.shape[1] // M
    free = as_float64(free, "free")
    if free.size != M * n or free.ndim > 2 or (free.ndim == 2 and free.shape != (M, n)):
        raise ValueError(f"free must have shape ({M}, {n}) (n_samples, free coordinates per sample) for "
                         f"this system, got {free.shape}")
    free = free.reshape(M, n)
    e = system.delta_free @ free.ravel() + system.delta_boundary @ system.u + system.edge_offset
    return e.reshape(M, -1)


def discord_by_block(system, free):
    """Discord of each edge block of each sample of an assembled system.

    Returns
    -------
    dict
        ``{edge block name: ndarray (n_samples,)}``; augmented systems add
        ``"e_pin"`` (all soft-pin edges) and ``"e_rel"`` (all reluctance
        edges) when present.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> s = sl.assemble(net, [[0.5, -1.0]], reduced=True)
    >>> sorted(discord_by_block(s, np.zeros((1, 7))))
    ['e_a1', 'e_z1', 'e_z2']
    """
    check_system(system)
    e = edge_discrepancies(system, free)
    lay = system.layout
    out = {b.name: 0.5 * (e[:, b.slice] ** 2).sum(axis=1) for b in lay.edge_blocks}
    if isinstance(system, AugmentedSheafSystem):
        ns = system.soft_pins.size
        start = lay.n_edges
        if ns:
            out["e_pin"] = 0.5 * (e[:, start:start + ns] ** 2).sum(axis=1)
        if system.reluctance > 0:
            out["e_rel"] = 0.5 * (e[:, start + ns:] ** 2).sum(axis=1)
    return out


def group_history(history, by="type"):
    """Group a :class:`~sheaflinalg.HeatHistory`'s discord columns (:func:`sheaflinalg.sheaf.edge_groups.group`)."""
    if not (hasattr(history, "discord") and hasattr(history, "labels")):  # duck-typed: dynamics stands beside discord
        raise TypeError(f"history must be a HeatHistory (the history of a heat run), got {type(history).__name__}")
    return group(history.discord, history.labels, by, history.layout)
