"""Coordinate layout of the neural sheaf: every block's size, offset and label.

Everything that needs an offset (assembler, kernels, diagnostics, plots) reads
it from a :class:`Layout`; nothing else computes block offsets.

Conventions (``DESIGN.md``): vertices in path order
``v_x, v_z1, v_a1, ..., v_ak, v_z(k+1), v_y``; edges
``e_z1, e_a1, e_z2, ..., e_ak, e_z(k+1), e_y``; free coordinates
``z1, a1, ..., ak, z(k+1), yhat``; boundary coordinates ``x, 1@x, 1@a1, ..., 1@ak``
(the ones block at ``v_x`` has ``n_1`` entries, the one at ``v_al`` has ``n_{l+1}``).

Graph networks (:meth:`Layout.from_graph`): the input ``x``, the nodes in
topological order (each with its defining edge ``e_<node>``), the ones block
``1><node>`` of every node with a bias right after its first parent, and
``yhat`` with ``e_y``; on the chain graph this is the order above.
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import check_bool, check_dims, did_you_mean
from ..kernels.structs import KernelLayout
from ..network.errors import GraphNetworkError
from ..network.graph.chain import chain_names
from ..network.graph.nodes import INPUT
from ..network.model import parameter_offsets
from .skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding, node_edges


def _chain_names(names, n_layers):
    """``names`` (a chain's ``2 n_layers - 1`` node names, default the paper's) checked, as a tuple."""
    if names is None:
        return chain_names(n_layers)
    names = tuple(names)
    if len(names) != 2 * n_layers - 1 or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"names must be {2 * n_layers - 1} distinct node names (linear, relu, ..., linear), "
                         f"got {list(names)!r}")
    return names


@dataclass(frozen=True)
class Block:
    """One named block of coordinates or of edge stalks.

    Attributes
    ----------
    name : str
        ``"x"``, ``"1@x"``, ``"z1"``, ``"a1"``, ``"1@a1"``, ``"yhat"``, or an edge ``"e_z1"``, ``"e_a1"``, ``"e_y"``.
    size : int
    offset : int
        Offset in the vector the block belongs to (free, boundary, edge or full).
    kind : str
        Coordinates: ``"input"``, ``"ones"``, ``"preactivation"``, ``"activation"``, ``"output"``.
        Edges: ``"weight"``, ``"activation"``, ``"output"``.
    layer : int
        Layer index ``l`` (0 for the input, ``k+2`` for the output vertex/edge).
    vertex : str
        Owning vertex (coordinates) or ``"upstream->downstream"`` (edges).
    """

    name: str
    size: int
    offset: int
    kind: str
    layer: int
    vertex: str

    @property
    def slice(self):
        """``slice(offset, offset + size)``."""
        return slice(self.offset, self.offset + self.size)


class Layout:
    """Block layout of the neural sheaf of a network with widths ``dims``.

    Parameters
    ----------
    dims : sequence of int
        ``[n_0, ..., n_{k+1}]``.
    reduced : bool
        Drop the output vertex ``v_y`` and output edge ``e_y`` (the reduced
        system of appendix A, used for identity output).
    names : sequence of str, optional
        The chain's node names (linear, relu, ..., linear); default the paper's
        ``z1, a1, ..., z(k+1)``.  Other names label the blocks as
        :meth:`from_graph` does: ``x``, ``1><node>``, the nodes, ``yhat``; edges ``e_<node>``, ``e_y``.

    Attributes
    ----------
    names : tuple of str or None
        A chain's node names (None for a graph network's layout).
    paper : bool
        Whether the blocks carry the paper's labels (a chain of nodes ``z1, a1, ..., z(k+1)``).

    Examples
    --------
    >>> lay = Layout([2, 3, 1])
    >>> [b.name for b in lay.free_blocks]
    ['z1', 'a1', 'z2', 'yhat']
    >>> lay.free("a1")
    slice(3, 6, None)
    >>> lay.n_free, lay.n_edges, lay.n_boundary
    (8, 8, 6)
    """

    #: How nodes with several parents are encoded (:meth:`from_graph`); a chain has none.
    skip_encoding = DEFAULT_SKIP_ENCODING

    def __init__(self, dims, reduced=False, names=None):
        dims = check_dims(dims)
        self.dims = dims
        self.graph = None
        self.reduced = check_bool(reduced, "reduced")
        self.n_hidden = len(dims) - 2
        self.names = _chain_names(names, len(dims) - 1)
        self.paper = self.names == chain_names(len(dims) - 1)
        coords = [(INPUT, dims[0], "input", 0, self._vertex(INPUT), False)]
        edges = []  # (name, size, kind, layer, "upstream->downstream")
        upstream = INPUT
        for i, name in enumerate(self.names):
            l = i // 2 + 1
            kind = ("preactivation", "weight") if i % 2 == 0 else ("activation", "activation")
            coords.append((name, dims[l], kind[0], l, self._vertex(name), True))
            edges.append(("e_" + name, dims[l], kind[1], l, f"{self._vertex(upstream)}->{self._vertex(name)}"))
            if i % 2 and l < len(dims) - 1:
                coords.append((self.ones(l), dims[l + 1], "ones", l, self._vertex(name), False))
            upstream = name
        coords.insert(1, (self.ones(0), dims[1], "ones", 0, self._vertex(INPUT), False))
        if not self.reduced:
            out = len(dims)
            coords.append(("yhat", dims[-1], "output", out, self._vertex("yhat"), True))
            edges.append(("e_y", dims[-1], "output", out, f"{self._vertex(upstream)}->{self._vertex('yhat')}"))
        self._build(coords, edges)

    def _vertex(self, name):
        # The paper's vertices are v_x, v_z1, ..., v_y; a chain of the user's nodes names them as a graph does.
        if not self.paper:
            return name
        return "v_y" if name == "yhat" else f"v_{name}"

    @classmethod
    def from_graph(cls, graph, reduced=False, skip_encoding=DEFAULT_SKIP_ENCODING):
        """The layout of a feedforward computational graph (:class:`~sheaflinalg.network.graph.Graph`).

        Coordinates: the input ``"x"``, every node (free, named as the node),
        the ones block ``"1>v"`` of every node ``v`` with a bias (boundary,
        placed right after ``v``'s first parent), and ``"yhat"`` (unless
        ``reduced``).  Edges: ``"e_" + v`` for every node (its one defining
        edge, a hyperedge when ``v`` has several parents), then ``"e_y"``;
        with ``skip_encoding="edges"`` a node with several parents has instead
        one edge ``"e_v<u"`` per parent ``u`` (:mod:`sheaflinalg.sheaf.skip_edges.encoding`).
        Block kinds: ``"input"``, ``"ones"``, the node's op, ``"output"``;
        ``layer`` is the node's position in topological order (1-based).  On
        the chain graph of an MLP the coordinate order is the MLP layout's.

        Examples
        --------
        >>> import numpy as np
        >>> from sheaflinalg.network.graph.chain import chain_graph
        >>> lay = Layout.from_graph(chain_graph([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)],
        ...                                     "identity"))
        >>> [b.name for b in lay.full_blocks]
        ['x', '1>z1', 'z1', 'a1', '1>z2', 'z2', 'yhat']
        >>> lay.edge("e_a1"), lay.full_labels[3]
        (slice(3, 6, None), '1>z1[1]')
        """
        self = cls.__new__(cls)
        self.dims = self.names = None
        self.paper = False
        self.graph = graph
        self.reduced = check_bool(reduced, "reduced")
        self.skip_encoding = check_skip_encoding(skip_encoding)
        self.n_hidden = None
        biased = {}
        for node in graph.nodes:
            if node.rule.has_bias:
                # the ones block follows the first parent (a node without parents: the input)
                biased.setdefault(node.inputs[0] if node.inputs else INPUT, []).append(node)
        coords = []
        for layer, (name, op) in enumerate([(INPUT, "input")] + [(n.name, n.op) for n in graph.nodes]):
            coords.append((name, graph.sizes[name], op, layer, name, name != INPUT))
            coords += [(f"1>{child.name}", graph.sizes[child.name], "ones", layer, name, False)
                       for child in biased.get(name, ())]
        edges = node_edges(graph, skip_encoding)
        if not self.reduced:
            out = graph.output_node
            coords.append(("yhat", graph.sizes[out], "output", len(graph.nodes) + 1, "yhat", True))
            edges.append(("e_y", graph.sizes[out], "output", len(graph.nodes) + 1, f"{out}->yhat"))
        self._build(coords, edges)
        return self

    @classmethod
    def for_network(cls, net, reduced=False):
        """The layout of ``net``: a chain's (:attr:`~sheaflinalg.Network.chain`: its dims and node names), or
        :meth:`from_graph` for a graph network.

        Examples
        --------
        >>> import numpy as np
        >>> from sheaflinalg import Network
        >>> from sheaflinalg.network.graph import Node
        >>> fc = Node("fc", "linear", ["x"], params={"weight": np.ones((3, 2)), "bias": np.zeros(3)})
        >>> out = Node("out", "linear", ["act"], params={"weight": np.ones((1, 3)), "bias": np.zeros(1)})
        >>> net = Network.from_nodes(2, [fc, Node("act", "relu", ["fc"]), out])
        >>> net.chain.names, [b.name for b in Layout.for_network(net).full_blocks]
        (('fc', 'act', 'out'), ['x', '1>fc', 'fc', 'act', '1>out', 'out', 'yhat'])
        """
        chain = net.chain
        if chain is None:
            return cls.from_graph(net.graph, reduced)
        return cls(net.dims, reduced, chain.names)

    @property
    def is_graph(self):
        """Whether this is the layout of a graph network (built by :meth:`from_graph`)."""
        return self.graph is not None

    def _build(self, coords, edges):
        # Blocks, offsets and lookups from (name, size, kind, layer, vertex, free?) coordinates and
        # (name, size, kind, layer, vertex) edges, both in cochain order.
        self.full_blocks, self.free_blocks, self.boundary_blocks = [], [], []
        full_off = free_off = bnd_off = 0
        for name, size, kind, layer, vertex, free in coords:
            self.full_blocks.append(Block(name, size, full_off, kind, layer, vertex))
            full_off += size
            if free:
                self.free_blocks.append(Block(name, size, free_off, kind, layer, vertex))
                free_off += size
            else:
                self.boundary_blocks.append(Block(name, size, bnd_off, kind, layer, vertex))
                bnd_off += size
        self.edge_blocks = []
        off = 0
        for name, size, kind, layer, vertex in edges:
            self.edge_blocks.append(Block(name, size, off, kind, layer, vertex))
            off += size
        self.n_full = full_off
        self.n_free = free_off
        self.n_boundary = bnd_off
        self.n_edges = off
        self._full = {b.name: b for b in self.full_blocks}
        self._free = {b.name: b for b in self.free_blocks}
        self._boundary = {b.name: b for b in self.boundary_blocks}
        self._edge = {b.name: b for b in self.edge_blocks}
        self.vertices = []
        for b in self.full_blocks:
            if not self.vertices or self.vertices[-1][0] != b.vertex:
                self.vertices.append((b.vertex, b.offset, b.size))
            else:
                name, o, s = self.vertices[-1]
                self.vertices[-1] = (name, o, s + b.size)

    def __repr__(self):
        if self.is_graph:
            return f"Layout.from_graph({self.graph!r}, reduced={self.reduced}, skip_encoding={self.skip_encoding!r})"
        names = "" if self.paper else f", names={list(self.names)}"
        return f"Layout(dims={self.dims}, reduced={self.reduced}{names})"

    # --------------------------------------------------------------- lookups
    def _get(self, table, name, what):
        try:
            return table[name]
        except KeyError:
            raise KeyError(f"no {what} block {name!r}; {did_you_mean(name, table)}") from None

    def free(self, name):
        """Slice of free block ``name`` in the free cochain ``omega``."""
        return self._get(self._free, name, "free").slice

    def boundary(self, name):
        """Slice of boundary block ``name`` in ``u``."""
        return self._get(self._boundary, name, "boundary").slice

    def edge(self, name):
        """Slice of edge ``name`` in the 1-cochain."""
        return self._get(self._edge, name, "edge").slice

    def full(self, name):
        """Slice of coordinate block ``name`` in the full 0-cochain."""
        return self._get(self._full, name, "coordinate").slice

    def free_block(self, name):
        """The :class:`Block` of free block ``name``."""
        return self._get(self._free, name, "free")

    def edge_block(self, name):
        """The :class:`Block` of edge ``name``."""
        return self._get(self._edge, name, "edge")

    def z(self, l):
        """Name of the pre-activation block of layer ``l`` (1-based): ``z<l>``, or the chain's node name."""
        return self.names[2 * l - 2]

    def a(self, l):
        """Name of the activation block of hidden layer ``l`` (1-based): ``a<l>``, or the chain's node name."""
        return self.names[2 * l - 1]

    def ones(self, l):
        """Name of the ones block of layer ``l = 0..k`` (the bias of ``z(l+1)``): ``1@x``, ``1@a<l>`` or ``1><node>``."""
        if not self.paper:
            return f"1>{self.z(l + 1)}"
        return "1@x" if l == 0 else f"1@a{l}"

    @property
    def output_block(self):
        """Name of the block that holds the network output (``yhat``, or ``z(k+1)`` / the output node when reduced)."""
        if not self.reduced:
            return "yhat"
        return self.graph.output_node if self.is_graph else self.names[-1]

    # ------------------------------------------------------- index vectors
    @property
    def free_index(self):
        """Positions of the free coordinates in the full 0-cochain (free order)."""
        return np.concatenate([np.arange(self._full[b.name].offset, self._full[b.name].offset + b.size)
                               for b in self.free_blocks])

    @property
    def boundary_index(self):
        """Positions of the boundary coordinates in the full 0-cochain (``u`` order)."""
        return np.concatenate([np.arange(self._full[b.name].offset, self._full[b.name].offset + b.size)
                               for b in self.boundary_blocks])

    @staticmethod
    def _labels(blocks):
        return [f"{b.name}[{i}]" for b in blocks for i in range(b.size)]

    @property
    def free_labels(self):
        """One label per free coordinate, e.g. ``"a1[3]"``."""
        return self._labels(self.free_blocks)

    @property
    def boundary_labels(self):
        """One label per boundary coordinate, e.g. ``"1@x[0]"``."""
        return self._labels(self.boundary_blocks)

    @property
    def edge_labels(self):
        """One label per edge-stalk coordinate, e.g. ``"e_z2[0]"``."""
        return self._labels(self.edge_blocks)

    @property
    def full_labels(self):
        """One label per coordinate of the full 0-cochain."""
        return self._labels(self.full_blocks)

    def boundary_values(self, x):
        """Boundary vector ``u = (x, 1, ..., 1)`` for one input ``x`` (flat, ``n_0`` entries)."""
        u = np.ones(self.n_boundary)
        u[self.boundary("x")] = x
        return u

    def split_free(self, omega):
        """Dictionary ``{block name: view}`` of a free cochain (last axis in free order)."""
        omega = np.asarray(omega)
        return {b.name: omega[..., b.slice] for b in self.free_blocks}

    # ----------------------------------------------------- kernel offsets
    def kernel_offsets(self):
        """The offsets the numba kernels index with, as one :class:`~sheaflinalg.kernels.structs.KernelLayout`.

        This is the only place that builds them (its fields are documented in
        :mod:`sheaflinalg.kernels.structs`): row offsets ``zoff``/``aoff`` of
        ``z_l``/``a_l`` in the free order, ``yhat_off`` (``-1`` when reduced),
        the parameter offsets ``woff``/``boff``, the edge blocks, the output block.

        Examples
        --------
        >>> off = Layout([2, 3, 1]).kernel_offsets()
        >>> off.zoff.tolist(), off.aoff.tolist(), off.yhat_off, off.out_off, off.n_parameters
        ([-1, 0, 6], [-1, 3, -1], 7, 7, 13)
        """
        if self.is_graph:
            raise GraphNetworkError("kernel_offsets describe the compiled kernels of a chain of Linear/ReLU "
                                    "layers; this is the layout of a graph network")
        k = self.n_hidden
        zoff = np.full(k + 2, -1, dtype=np.int64)
        aoff = np.full(k + 2, -1, dtype=np.int64)
        for l in range(1, k + 2):
            zoff[l] = self._free[self.z(l)].offset
            if l <= k:
                aoff[l] = self._free[self.a(l)].offset
        woff, boff, n_parameters = parameter_offsets(self.dims)
        return KernelLayout(
            dims=np.asarray(self.dims, dtype=np.int64), zoff=zoff, aoff=aoff, woff=woff, boff=boff,
            yhat_off=-1 if self.reduced else self._free["yhat"].offset,
            edge_offsets=np.asarray([b.offset for b in self.edge_blocks], dtype=np.int64),
            edge_sizes=np.asarray([b.size for b in self.edge_blocks], dtype=np.int64),
            out_off=self._free[self.output_block].offset, n_out=self.dims[-1], n_parameters=n_parameters)
