"""A level of tied max-pool entries over dead ReLUs held as one coordinate instead of as pairs.

The Filippov search holds the entries of a group of tied max-pool windows equal
(pairs ``(u, i, j)``: :mod:`~.switching`, :mod:`~.window_levels`); a frozen
pinned solve holds each pair as a column of its Lagrange system, and a dead channel of an
ImageNet stem holds hundreds of thousands of them.  When every entry of a group is
the output of a ReLU that is inactive there, and the max pool is that ReLU's only
reader, the pairs are not needed: with the ``d`` entries at a common value ``v``,
their ReLU edges (``y_i - 0 z_i``) contribute ``d v^2`` and every window selecting one
of them reads ``v``.  In the coordinate ``c = sqrt(d) v`` the group's first entry
``r`` keeps its own edge (``c``, energy ``d v^2``), every window selecting an entry of
the group selects ``r`` through a map scaled by ``1/sqrt(d)``, and the other entries,
read by no window, solve to 0: the same minimiser, by a square unit lower triangular
system again (the row scales are the ``rows`` of
:class:`~.coboundary.GraphCoboundary`).  :func:`collapse` builds it and
:meth:`Collapsed.spread` writes ``v`` back on every entry of the group.
"""

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ...network.ops import SELECTION
from .window_levels import dead_parent


class Collapsed:
    """The collapsed groups of one sample: the pattern and row scales to solve under, the pairs left as columns.

    Attributes
    ----------
    pattern : dict
        ``{node: (1, size)}``: the pattern solved under (a selection of a group's entry moved to its first entry).
    rows : dict
        ``{node: [scale]}``: the ``rows`` of :class:`~.coboundary.GraphCoboundary` (``1/sqrt(d)`` on the windows
        that read a group; empty when nothing is collapsed).
    surface : list
        The held coordinates and pairs still solved as columns.
    entries, first, size : ndarray
        Per entry of a collapsed group (positions in the free cochain, group by group), its group's first entry
        (which holds ``c``) and its group's size ``d``.
    """

    def __init__(self, pattern, rows, surface, entries, first, size):
        self.pattern, self.rows, self.surface = pattern, rows, surface
        self.entries, self.first, self.size = entries, first, size

    @property
    def n_groups(self):
        """The number of collapsed groups."""
        return int(np.sum(self.entries == self.first))

    def spread(self, w):
        """Write every collapsed group's common value ``c / sqrt(d)`` on all its entries of ``w`` (in place)."""
        w[:, self.entries] = w[:, self.first] / np.sqrt(self.size)
        return w


def collapse(graph, layout, pattern, surface):
    """:class:`Collapsed` of one sample's ``surface`` (``(node, j)`` and ``(node, i, j)``) under ``pattern``.

    A connected group of pairs is collapsed when its node is the output of a ``relu`` inactive at every entry of
    the group and its only reader is one max pool; every other held coordinate and pair is left as it is.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.layout import Layout
    >>> net = sl.Network.from_nodes((1, 4), [sl.Node("r", "relu", ["x"]),
    ...     sl.Node("p", "maxpool", ["r"], {"kernel_size": 2, "stride": 1, "padding": 0, "dilation": 1})])
    >>> pattern = {"r": np.zeros((1, 4), dtype=bool), "p": np.array([[0, 1, 2]])}
    >>> done = collapse(net.graph, Layout.from_graph(net.graph, reduced=True), pattern,
    ...                 [("r", 0, 1), ("r", 1, 2)])
    >>> done.pattern["p"].tolist(), done.rows["p"][0][0].round(4).tolist(), done.surface
    ([[0, 0, 0]], [0.5774, 0.5774, 0.5774], [])
    """
    pairs = [held for held in surface if len(held) == 3]
    kept = [held for held in surface if len(held) == 2]
    out, rows, collapsed = dict(pattern), {}, []
    for u in sorted({held[0] for held in pairs}):
        mine = np.array([held[1:] for held in pairs if held[0] == u], dtype=np.int64)
        pool = _collapsible(graph, u)
        label = None if pool is None else _dead_groups(mine, pattern[u][0])
        left = mine if label is None else mine[label[mine[:, 0]] < 0]
        kept += [(u, int(i), int(j)) for i, j in left]
        entries = np.flatnonzero(label >= 0) if label is not None else ()
        if len(entries) == 0:
            continue
        entries = entries[np.lexsort((entries, label[entries]))]        # by group, each group's entries in order
        starts = np.r_[0, np.flatnonzero(np.diff(label[entries])) + 1]
        first, size = entries[starts], np.diff(np.r_[starts, entries.size])
        selected = out[pool] = pattern[pool].copy()
        group = label[selected[0]]
        reading = group >= 0
        selected[0, reading] = first[group[reading]]
        scale = np.ones(graph.sizes[pool])
        scale[reading] = 1.0 / np.sqrt(size[group[reading]])
        rows[pool] = [scale[None]]
        start = layout.free(u).start
        collapsed.append((start + entries, start + np.repeat(first, size), np.repeat(size, size)))
    columns = [np.concatenate(part) if collapsed else np.zeros(0, dtype=np.int64) for part in zip(*collapsed)]
    return Collapsed(out, rows, sorted(kept, key=lambda h: (h[0],) + tuple(h[1:])),
                     *(columns or [np.zeros(0, dtype=np.int64)] * 3))


def _dead_groups(pairs, active):
    """Per entry of the node (``active``: its ReLU's pattern), the number of its group under the pairs ``(i, j)``
    when every entry of the group is inactive (numbered from 0 in the order of their smallest entries), else -1."""
    n = active.size
    _, label = connected_components(coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n)),
                                    directed=False)
    held = np.zeros(n, dtype=bool)
    held[pairs.ravel()] = True
    live = np.zeros(label.max() + 1, dtype=bool)
    live[label[held & active]] = True
    dead = held & ~live[label]
    label[~dead] = -1
    _, label[dead] = np.unique(label[dead], return_inverse=True)
    return label


def _collapsible(graph, u):
    """The name of the one max pool reading ``u`` when ``u`` is a ``relu`` (a mask of slope 0,
    :func:`~.window_levels.dead_parent`) read by nothing else; None otherwise."""
    children = graph.children(u)
    if not dead_parent(graph, u) or len(children) != 1:
        return None
    pool = graph.node(children[0])
    if pool.rule.pattern is not SELECTION or list(pool.inputs) != [u]:
        return None
    return pool.name
