"""``delta_Omega`` of a graph network as a matrix-free operator: products and substitutions node by node.

For a batch of samples with a frozen pattern, every node ``v`` has the defining
edge ``(delta w)_v = w_v - sum over free parents u of F_(u->v) w_u`` (the input
and the ones blocks are boundary, so they do not enter ``delta_Omega``), and the
output edge ``(delta w)_y = yhat - J z_out`` unless the system is reduced.
This module applies ``delta_Omega``, its transpose and both inverses (forward
substitution in topological order, backward substitution in reverse) with the
convolution and pooling kernels, never building a matrix: the building block of
spectra, heat and training on graph networks.  Cochains are ``(n_samples,
n_free)`` arrays in the layout's free order (:meth:`Layout.from_graph`).
"""

import numpy as np

from ..._common.blocks import map_blocks
from ..._common import threads as _threads
from ...network.graph.nodes import INPUT
from .node_maps import NodeMaps
from ..layout import Layout


def _jacobian_product(jacobians, v):
    """``J v`` for every sample (rows): ``jacobians`` by diagonals ``(S, n)`` or dense ``(S, n, n)``."""
    return jacobians * v if jacobians.ndim == 2 else np.einsum("sij,sj->si", jacobians, v)


def _jacobian_transpose_product(jacobians, v):
    """``J^T v`` for every sample (rows), as :func:`_jacobian_product`."""
    return jacobians * v if jacobians.ndim == 2 else np.einsum("sij,si->sj", jacobians, v)


class GraphCoboundary:
    """``delta_Omega`` of a graph network for a batch under a frozen pattern, without a matrix.

    Parameters
    ----------
    graph : Graph
    pattern : dict
        ``{node: (n_samples, size) array}`` (masks, argmax), as :func:`sheaflinalg.harmonic_extension`
        returns it (checked by the caller).
    jacobians : ndarray, shape (n_samples, n_out) or (n_samples, n_out, n_out), optional
        ``J_phi`` of the output edge, by its diagonal (an elementwise output) or dense (softmax); None
        for the reduced system (no ``yhat``, no ``e_y``).
    maps : NodeMaps, optional
        The graph's :class:`~sheaflinalg.sheaf.matrix_free.node_maps.NodeMaps`, when the caller has them.
    layout : Layout, optional
        The graph's layout (reduced exactly when ``jacobians`` is None), when the caller has it.
    rows : dict, optional
        ``{node: [scale of parent 0, scale of parent 1, ...]}``: float vectors of the node's size (None:
        every row) scaling the rows of each parent's map ``F_(u_i->v)``.  With 0/1 masks the operator is the
        square unit lower triangular block ``T`` of the tall ``delta_Omega`` of ``skip_encoding="edges"`` that
        picks one parent's edge per row of an ``add`` node (:mod:`sheaflinalg.sheaf.skip_edges.iterative`); with
        ``1/sqrt(d)`` on the windows of a max pool reading a level of ``d`` dead entries, the pinned solve's system
        with that level as one coordinate (:mod:`~.dead_levels`).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((1, 4), [conv, sl.Node("r", "relu", ["c"])])
    >>> x = np.array([[1.0, -2.0, 3.0, 0.5]])
    >>> op = GraphCoboundary(net.graph, sl.harmonic_extension(net, x).pattern)
    >>> w = np.random.default_rng(0).normal(size=(1, op.layout.n_free))
    >>> bool(np.allclose(op.solve(op.apply(w)), w))
    True
    """

    def __init__(self, graph, pattern, jacobians=None, maps=None, layout=None, rows=None):
        self.graph = graph
        self.rows = {} if rows is None else rows
        self.jacobians = jacobians
        self.layout = Layout.from_graph(graph, reduced=jacobians is None) if layout is None else layout
        self.maps = NodeMaps(graph) if maps is None else maps
        self.pattern = pattern
        # every node's edge and free block (same offsets), looked up once instead of at every product
        self._edges = {node.name: self.layout.edge(f"e_{node.name}") for node in graph.nodes}
        self._slices = [(b.name, b.slice) for b in self.layout.free_blocks]

    @property
    def pattern(self):
        """The frozen pattern ``{node: (n_samples, size) array}``; setting it prepares the maps' forms."""
        return self._pattern

    @pattern.setter
    def pattern(self, pattern):
        self._pattern = pattern
        self._prepared = {name: self.maps.prepare(name, rows) for name, rows in pattern.items()}

    def _mask(self, node, i):
        masks = self.rows.get(node.name)
        return None if masks is None else masks[i]

    def _forward(self, node, i, x):
        y = self.maps.forward(node.name, i, x, self._prepared.get(node.name))
        mask = self._mask(node, i)
        return y if mask is None else y * mask

    def _transpose(self, node, i, y):
        mask = self._mask(node, i)
        return self.maps.transpose(node.name, i, y if mask is None else y * mask, self._prepared.get(node.name))

    def _blocks(self, w):
        return {name: w[:, where] for name, where in self._slices}

    def _each_node(self, fn, threads, only=None):
        """``fn(node)`` for every node (``only``: the nodes named in it; None for the others), in order: lazily
        (one node at a time) on one thread; with ``threads > 1`` and a second core free, all at once, the
        nodes shared by two threads in two fixed halves of about equal work.  ``fn`` must write nothing
        another call reads."""
        nodes = self.graph.nodes
        if threads < 2 or len(nodes) < 2 or _threads.usable_threads(2) < 2:
            return (None if only is not None and node.name not in only else fn(node) for node in nodes)
        halves = self._halves()
        if only is not None:
            halves = [[i for i in half if nodes[i].name in only] for half in halves]
        done = map_blocks(lambda half: [fn(nodes[i]) for i in half], halves, 2)
        results = [None] * len(nodes)
        for half, values in zip(halves, done):
            for i, value in zip(half, values):
                results[i] = value
        return results

    def _halves(self):
        """The nodes' indices in two halves of about equal work (their rules' estimates), by the graph alone."""
        if getattr(self, "_halves_cache", None) is None:
            self._halves_cache = _two_halves([node.rule.work(node, self.graph) for node in self.graph.nodes])
        return self._halves_cache

    def _sums(self):
        """The nodes' indices in two halves of about equal size (the free blocks the transpose adds into)."""
        if getattr(self, "_sums_cache", None) is None:
            self._sums_cache = _two_halves([self.graph.sizes[node.name] for node in self.graph.nodes])
        return self._sums_cache

    def apply(self, w, threads=1, only=None):
        """``delta_Omega w`` (edges in the layout's order; here one edge per free block, same offsets).

        ``threads``: 2 shares the nodes' edges between two threads (each edge is computed as alone).
        ``only``: the names of the nodes whose edges are computed, the others written as zero (exact when
        the blocks of ``w`` of such a node and of its parents are zero: :meth:`support`).
        """
        blocks = self._blocks(w)
        out = np.empty_like(w) if only is None else np.zeros_like(w)

        def edge(node):
            e = out[:, self._edges[node.name]]
            e[...] = blocks[node.name]
            for i, parent in enumerate(node.inputs):
                if parent != INPUT:
                    e -= self._forward(node, i, blocks[parent])
        list(self._each_node(edge, threads, only))
        if self.jacobians is not None:
            z = blocks[self.graph.output_node]
            out[:, self.layout.edge("e_y")] = blocks["yhat"] - _jacobian_product(self.jacobians, z)
        return out

    def apply_transpose(self, e, threads=1, only=None):
        """``delta_Omega^T e``.

        ``threads``: 2 computes the nodes' transposed maps in two threads; they are added up in one
        fixed order (the nodes', as with one thread), so the result is the same bit for bit.
        ``only``: the names of the nodes whose edges are read, the others taken as zero (exact when they are).
        """
        out = np.zeros(e.shape)      # calloc: the pages are zeroed as the (two) threads first write them
        free = self._blocks(out)

        def transposes(node):
            edge = e[:, self._edges[node.name]]
            return [(parent, self._transpose(node, i, edge)) for i, parent in enumerate(node.inputs)
                    if parent != INPUT]
        parts = self._each_node(transposes, threads, only)
        if not isinstance(parts, list):
            for node, node_parts in zip(self.graph.nodes, parts):
                if node_parts is None:
                    continue
                free[node.name] += e[:, self._edges[node.name]]
                for parent, part in node_parts:
                    free[parent] -= part
        else:
            self._sum_parts(e, free, parts)
        if self.jacobians is not None:
            ey = e[:, self.layout.edge("e_y")]
            free["yhat"] += ey
            free[self.graph.output_node] -= _jacobian_transpose_product(self.jacobians, ey)
        return out

    def _sum_parts(self, e, free, parts):
        """``free[v] = e_v - (the parts sent to v)`` for every node ``v``, the blocks shared by two threads in
        two fixed halves; each block adds its parts in the nodes' order, as one thread does (bit for bit)."""
        nodes = self.graph.nodes
        into = {node.name: [] for node in nodes}
        for node_parts in parts:
            for parent, part in node_parts or ():
                into[parent].append(part)

        def add(half):
            for i in half:
                name = nodes[i].name
                value = free[name]
                value += e[:, self._edges[name]]
                for part in into[name]:
                    value -= part
        map_blocks(add, self._sums(), 2)

    def support(self, w):
        """The names of the nodes whose edges of ``delta_Omega w`` can be nonzero: those with a nonzero block of
        ``w`` and their children (the ``only`` of :meth:`apply` and :meth:`apply_transpose`), or None when that is
        every node or the system has an output edge."""
        if self.jacobians is not None:
            return None
        nonzero = {name for name, where in self._slices if np.any(w[:, where])}
        only = {node.name for node in self.graph.nodes
                if node.name in nonzero or any(parent in nonzero for parent in node.inputs)}
        return None if len(only) == len(self.graph.nodes) else only

    def solve(self, r, out=None):
        """``delta_Omega^{-1} r`` by forward substitution in topological order (into ``out``, not ``r``, if given)."""
        out = np.empty_like(r) if out is None else out
        free = self._blocks(out)
        self.solve_blocks({name: r[:, where] for name, where in self._edges.items()}, free)
        if self.jacobians is not None:
            z = free[self.graph.output_node]
            free["yhat"][...] = r[:, self.layout.edge("e_y")] + _jacobian_product(self.jacobians, z)
        return out

    def solve_blocks(self, r, out):
        """:meth:`solve` of the reduced system on node blocks: ``out[v] = r[v] + sum over parents u of F_(u->v)
        out[u]`` in topological order, ``r`` and ``out`` ``{node: (n_samples, size)}`` (a node missing from ``r``
        has no residual).  Each block is written once, its terms added in that order (bit for bit :meth:`solve`'s);
        contiguous blocks (a caller's own arrays, not views of one cochain) spare the strided passes."""
        for node in self.graph.nodes:
            parts = [self._forward(node, i, out[parent]) for i, parent in enumerate(node.inputs) if parent != INPUT]
            _sum_into(out[node.name], r.get(node.name), parts)
        return out

    def solve_transpose(self, r, out=None):
        """``delta_Omega^{-T} r`` by backward substitution in reverse topological order (into ``out``, not ``r``,
        if given)."""
        out = np.empty(r.shape) if out is None else out
        free = self._blocks(out)
        edges = self._blocks(r)
        sent = {}
        if self.jacobians is not None:
            free["yhat"][...] = edges["yhat"]
            sent[self.graph.output_node] = [_jacobian_transpose_product(self.jacobians, free["yhat"])]
        self.solve_transpose_blocks(edges, free, sent)
        return out

    def solve_transpose_blocks(self, r, out, sent=None):
        """:meth:`solve_transpose` of the reduced system on node blocks (as :meth:`solve_blocks`; ``sent``: parts
        already sent to nodes, ``{node: [arrays]}``, consumed).

        A node's block is complete once its children are done (reverse topological order): it is written once,
        the transposed maps its children sent it added up in their order and ``r_v`` last (the sums of a zeroed
        buffer added into, bit for bit), with no zero fill and no accumulation into strided blocks."""
        sent = {} if sent is None else sent
        for node in reversed(self.graph.nodes):
            value = out[node.name]
            _sum_into(value, r.get(node.name), sent.pop(node.name, []), last=True)
            for i, parent in enumerate(node.inputs):
                if parent != INPUT:
                    sent.setdefault(parent, []).append(self._transpose(node, i, value))
        return out


def _sum_into(out, edge, parts, last=False):
    """``out = edge + parts[0] + parts[1] + ...``, left to right (``last``: ``parts[0] + ... + edge``, the order of a
    zeroed block that the parts were added into before the edge; ``edge`` None: none), the last addition written
    into ``out`` (which may be a strided view): one pass over it."""
    terms = ([] if edge is None else [edge])
    terms = parts + terms if last else terms + parts
    if len(terms) < 2:
        out[...] = terms[0] if terms else 0.0
        return
    total = terms[0]
    if len(terms) > 2:
        total = terms[0] + terms[1]
        for term in terms[2:-1]:
            total += term
    np.add(total, terms[-1], out=out)


def _two_halves(weights):
    """Indices ``0 .. len(weights) - 1`` in two sorted halves of about equal total weight (heaviest first, each to
    the lighter half).

    Examples
    --------
    >>> _two_halves([5, 1, 4, 2])
    ([0, 1], [2, 3])
    """
    halves, loads = ([], []), [0, 0]
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        lighter = int(loads[1] < loads[0])
        halves[lighter].append(i)
        loads[lighter] += weights[i]
    return sorted(halves[0]), sorted(halves[1])
