"""Activation patterns: validated hidden-layer masks (chains), pattern dicts (graphs), the linearised output map.

Shared by assembly, harmonic extension and the spectral drivers (one place
below all of them, so none needs to import another for these helpers).
"""

import numpy as np

from ..network import activations


def normalise_pattern(net, pattern, n_samples):
    """Validate an activation pattern and return it as a list of (n_samples, n_l) bool arrays.

    ``pattern`` is a sequence with one entry per hidden layer; each entry has
    shape ``(n_l,)`` (shared by every sample) or ``(n_samples, n_l)``.
    Values must be boolean or 0/1.
    """
    k = net.n_hidden
    if isinstance(pattern, (str, bytes)) or not hasattr(pattern, "__len__"):
        raise TypeError(f"pattern must be a sequence of masks, one per hidden layer ({k}), "
                        f"got {type(pattern).__name__}")
    if len(pattern) != k:
        raise ValueError(f"pattern needs one mask per hidden layer ({k}), got {len(pattern)}")
    out = []
    for l, (mask, n) in enumerate(zip(pattern, net.dims[1:-1]), start=1):
        try:
            m = np.asarray(mask)
        except ValueError:
            raise ValueError(f"pattern layer {l} is ragged") from None
        if m.dtype != bool:
            if m.dtype.kind not in "iuf" or not np.all((m == 0) | (m == 1)):
                raise ValueError(f"pattern layer {l} must be boolean (or 0/1)")
            m = m.astype(bool)
        if m.ndim == 1:
            m = np.broadcast_to(m, (n_samples, m.size))
        if m.shape != (n_samples, n):
            raise ValueError(f"pattern layer {l} has shape {np.shape(mask)}; expected ({n},) or ({n_samples}, {n})")
        out.append(np.ascontiguousarray(m))
    return out


def output_jacobian(output, z):
    """Linearised output restriction map at ``z`` (one sample, or a batch as rows): its diagonal (the
    shape of ``z``) for an elementwise output, dense ``(n, n)`` for softmax (``(M, n, n)`` for rows)."""
    if output == "softmax":
        return activations.jacobian(output, z)
    return activations.jacobian_diagonal(output, z)


def _pattern_array(value, shape_one, n_samples, what):
    try:
        arr = np.asarray(value)
    except ValueError:
        raise ValueError(f"{what} is ragged") from None
    if arr.ndim == 1:
        arr = np.broadcast_to(arr, (n_samples, arr.size))
    if arr.shape != (n_samples, shape_one):
        raise ValueError(f"{what} has shape {np.shape(value)}; expected ({shape_one},) or ({n_samples}, {shape_one})")
    return arr


def normalise_graph_pattern(graph, pattern, n_samples):
    """Validate a graph network's pattern and return it as ``{node: (n_samples, n) array}``.

    ``pattern`` is a dict with one entry per pattern-dependent node
    (:attr:`~sheaflinalg.network.graph.Graph.pattern_nodes`): a bool (or 0/1)
    mask for a rectifier (``True`` = active), int argmax positions in the
    parent's stalk for a selection (each inside its window), as the node's rule
    checks it; shape ``(n,)`` (every sample) or ``(n_samples, n)``.

    Examples
    --------
    >>> import numpy as np
    >>> from sheaflinalg.network.graph import Graph, Node
    >>> g = Graph((1, 4), [Node("p", "maxpool", ["x"], {"kernel_size": 2, "stride": 2, "padding": 0,
    ...                                                 "dilation": 1})])
    >>> normalise_graph_pattern(g, {"p": [1, 2]}, 1)["p"].tolist()
    [[1, 2]]
    >>> normalise_graph_pattern(g, {"p": [1, 1]}, 1)
    Traceback (most recent call last):
    ...
    ValueError: pattern['p']: entry 1 of sample 0 is 1, not a position inside its window (output 1 of channel 0 reads [2, 3])
    """
    names = graph.pattern_nodes
    if not isinstance(pattern, dict):
        raise TypeError(f"the pattern of a graph network must be a dict {{node: array}} over its pattern nodes "
                        f"{names}, got {type(pattern).__name__}")
    missing, extra = [n for n in names if n not in pattern], [k for k in pattern if k not in names]
    if missing or extra:
        raise ValueError(f"pattern must have exactly one entry per pattern node {names}: missing {missing}, "
                         f"unexpected {extra}")
    out = {}
    for name in names:
        node, what = graph.node(name), f"pattern[{name!r}]"
        rows = _pattern_array(pattern[name], graph.pattern_size(name), n_samples, what)
        out[name] = node.rule.check_pattern(node, graph, rows, what)
    return out


def same_pattern(graph, new, old, n_samples):
    """Per sample, whether two pattern dicts of ``graph`` are the same pieces (each node's rule decides:
    equal masks and selections, linearisation points equal up to rounding); nodes missing from ``old`` are
    not compared."""
    same = np.ones(n_samples, dtype=bool)
    for name in (name for name in graph.pattern_nodes if name in old):
        node = graph.node(name)
        same &= node.rule.same_pattern(node, new[name], old[name])
    return same


def graph_pattern(graph, values, previous=None, rtol=1e-12, skip=()):
    """The pattern every pattern node reads off its parents' values (``z >= 0`` active; first maximum of a
    window; a smooth node's linearisation point: its parents' values themselves, side by side).

    ``values`` is ``{node: (n_samples, n) array}`` (a harmonic extension or a
    completion).  With ``previous`` (a pattern dict), a max-pool keeps its
    previous selection wherever that is still a maximum up to ``rtol`` times
    the sample's largest ``|value|`` in the parent (ties that a numerical solve
    resolves by rounding noise, e.g. windows of dead ReLUs, do not flip).  The nodes in ``skip`` are left out
    (a caller that reads them its own way).
    """
    out = {}
    for name in (name for name in graph.pattern_nodes if name not in skip):
        node = graph.node(name)
        parents = [values[p] for p in node.inputs]
        z = parents[0] if len(parents) == 1 else np.concatenate(parents, axis=1)
        out[name] = node.rule.read_pattern(node, graph, z, None if previous is None else previous[name], rtol)
    return out
