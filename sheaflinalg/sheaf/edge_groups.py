"""Edge groups: the kind and the layer of an edge-block label, and sums of per-block columns by either.

The labels are the layout's edge-block names (``e_z1``, ``e_a1``, ...,
``e_y``; see :class:`~sheaflinalg.sheaf.layout.Layout`) and the two augmented
blocks ``e_pin`` (all soft-pin edges) and ``e_rel`` (all reluctance edges).
Euler's :class:`~sheaflinalg.HeatHistory` and the discord analysis
(:mod:`sheaflinalg.discord`) both group their discord columns with :func:`group`.
A graph network's edges are named after their nodes (``e_conv1``); given its
layout, :func:`group` reads their kind (the node's op) and layer (the node's
position in topological order) from the layout's edge blocks.
"""

from .._common.validation import as_float64, check_choice, check_type


def edge_kind(label):
    """Kind of an edge-block label: ``weight``, ``activation``, ``output``, ``pin`` or ``reluctance``.

    Examples
    --------
    >>> edge_kind("e_z2"), edge_kind("e_a1"), edge_kind("e_pin")
    ('weight', 'activation', 'pin')
    """
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
    """Layer of an edge-block label (``e_z2`` -> 2, ``e_a1`` -> 1, ``e_y`` -> ``"output"``).

    Examples
    --------
    >>> edge_layer("e_z2"), edge_layer("e_y"), edge_layer("e_rel")
    (2, 'output', 'reluctance')
    """
    kind = edge_kind(label)
    if kind in ("pin", "reluctance", "output"):
        return kind
    return int(label[3:])


def _graph_key(layout, by):
    """Kind or layer of an edge label of a layout whose nodes are not named as in the paper (a graph's: the
    node's op and topological position; a chain's: ``weight``/``activation`` and its layer)."""
    blocks = {b.name: b for b in layout.edge_blocks}

    def key(label):
        if label in ("e_pin", "e_rel", "e_y"):
            return edge_kind(label) if by == "type" else edge_layer(label)
        if label not in blocks:
            raise ValueError(f"unknown edge block label {label!r} of this graph network")
        return blocks[label].kind if by == "type" else blocks[label].layer
    return key


def group(values, labels, by="type", layout=None):
    """Sum discord columns by edge ``"type"`` or ``"layer"``.

    Parameters
    ----------
    values : ndarray, shape (..., n_labels)
    labels : list of str
        Edge-block labels of the last axis.
    by : {"type", "layer"}
    layout : Layout, optional
        The labels' layout; needed for a graph network (types are the nodes' ops, layers their
        positions in topological order) and for a chain of nodes named otherwise than ``z1, a1, ...``.

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
        raise ValueError(f"values have {values.shape[-1] if values.ndim else 0} columns but {len(labels)} "
                         "labels were given")
    if layout is not None and not layout.paper:
        key = _graph_key(layout, by)
    else:
        key = edge_kind if by == "type" else edge_layer
    out = {}
    for j, lab in enumerate(labels):
        g = key(lab)
        out[g] = out.get(g, 0.0) + values[..., j]
    return out
