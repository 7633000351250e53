"""Per-edge discord: ``1/2 ||(delta omega_bar)_e||^2`` by edge, edge block, edge type and layer.

Two sources give the same numbers: the kernels' ``E`` array (edge
discrepancies in the free-row order, see :mod:`sheaflinalg.kernels.force`)
and an assembled system (``delta_free @ omega + delta_boundary @ u +
edge_offset``).  Labels come from the :class:`~sheaflinalg.sheaf.layout.Layout`.

Also here (as ``sl.discord.residuals`` and ``sl.discord.pinned``): the
per-coordinate residuals of any state (:mod:`sheaflinalg.dynamics.residuals`)
and the pinned analysis of any network (:mod:`sheaflinalg.dynamics.pinned`).
"""

import numpy as np

from .._common.validation import as_float64, check_choice, check_type
from ..sheaf.assembly import AugmentedSheafSystem, check_system
from .pinned import PinnedDiscord, pinned  # noqa: F401 (sl.discord.pinned)
from .residuals import EdgeResiduals, residuals  # noqa: F401 (sl.discord.residuals)

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


def edge_kind(label):
    """Kind of an edge-block label: ``weight``, ``activation``, ``output``, ``pin`` or ``reluctance``."""
    check_type(label, str, "label", "an edge-block label (str, e.g. 'e_z1')")
    if label == "e_pin":
        return "pin"
    if label == "e_rel":
        return "reluctance"
    if label == "e_y":
        return "output"
    if label.startswith("e_a"):
        return "activation"
    if label.startswith("e_z"):
        return "weight"
    raise ValueError(f"unknown edge block label {label!r}")


def edge_layer(label):
    """Layer of an edge-block label (``e_z2`` -> 2, ``e_a1`` -> 1, ``e_y`` -> ``"output"``)."""
    kind = edge_kind(label)
    if kind in ("pin", "reluctance", "output"):
        return kind
    return int(label[3:])


def group(values, labels, by="type"):
    """Sum discord columns by edge ``"type"`` or ``"layer"``.

    Parameters
    ----------
    values : ndarray, shape (..., n_labels)
    labels : list of str
        Edge-block labels of the last axis.
    by : {"type", "layer"}

    Returns
    -------
    dict
        ``{group: ndarray (...)}`` in first-appearance order.

    Examples
    --------
    >>> import numpy as np
    >>> g = group(np.array([1.0, 2.0, 3.0]), ["e_z1", "e_a1", "e_z2"])
    >>> {k: float(v) for k, v in g.items()}
    {'weight': 4.0, 'activation': 2.0}
    """
    check_choice(by, ("type", "layer"), "by")
    values = as_float64(values, "values")
    if values.ndim == 0 or values.shape[-1] != len(labels):
        raise ValueError(f"values have {values.shape[-1]} columns but {len(labels)} labels were given")
    key = edge_kind if by == "type" else edge_layer
    out = {}
    for j, lab in enumerate(labels):
        g = key(lab)
        out[g] = out.get(g, 0.0) + values[..., j]
    return out


def group_history(history, by="type"):
    """Group a :class:`~sheaflinalg.HeatHistory`'s discord columns (see :func:`group`)."""
    if not (hasattr(history, "discord") and hasattr(history, "labels")):  # HeatHistory: heat.py imports this module
        raise TypeError(f"history must be a HeatHistory (the history of a heat run), got {type(history).__name__}")
    return group(history.discord, history.labels, by)
