"""Assembly of the neural sheaf's coboundary and Laplacian blocks as scipy.sparse CSR.

Each edge contributes one block row ``(delta x)_e = F_down x_down - F_up x_up``;
the matrices are written straight from those blocks (see
:mod:`sheaflinalg.sheaf.sparse_blocks`), so assembly time and memory grow with the
number of weights, never with ``N**2``.
"""

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .._common.memory import check_memory
from .._common.validation import as_float64, as_samples, check_bool, check_type
from ..network import activations
from ..network.model import Network, check_network
from .harmonic import graph_extension, harmonic_extension
from .layout import Layout
from .patterns import normalise_graph_pattern, normalise_pattern, output_jacobian
from .pins import resolve_pins
from .restriction_maps import map_nnz, node_bias, node_maps
from .skip_edges import check_skip_encoding, split_static_rows
from .sparse_blocks import csr_from_blocks, transpose_times


def coboundary_rows(net, lay, mask_row, out_jacobian, reduced):
    """Block rows of the coboundary of one sample, in edge order (block names of the chain layout ``lay``).

    Returns a list ``[(edge_name, [(coordinate_block_name, block), ...]), ...]``
    where a block is a dense matrix or a 1-D diagonal.  ``mask_row`` holds the
    hidden-layer masks of this sample; ``out_jacobian`` the linearised output
    restriction map (1-D diagonal or dense), ignored when ``reduced``.
    """
    k = net.n_hidden
    W, b = net.weights, net.biases
    z, a = lay.z, lay.a
    rows = [("e_" + z(1), [("x", -W[0]), (lay.ones(0), -b[0]), (z(1), np.ones(net.dims[1]))])]
    for l in range(1, k + 1):
        rows.append(("e_" + a(l), [(z(l), -mask_row[l - 1].astype(np.float64)), (a(l), np.ones(net.dims[l]))]))
        rows.append(("e_" + z(l + 1), [(a(l), -W[l]), (lay.ones(l), -b[l]), (z(l + 1), np.ones(net.dims[l + 1]))]))
    if not reduced:
        rows.append(("e_y", [(z(k + 1), -out_jacobian), ("yhat", np.ones(net.dims[-1]))]))
    return rows


def node_row(node, graph, pattern=None):
    """The block row of node ``v``'s defining edge ``x_v - sum_u F_(u->v) x_u - diag(b_v) 1_v`` (one sample).

    ``[(parent, -F), ..., ("1>v", -b_v), (v, identity)]``, the identity as a 1-D
    diagonal; ``pattern`` is the node's own pattern for one sample (pattern nodes only).
    """
    entries = [(u, -F) for u, F in node_maps(node, graph, pattern)]
    bias = node_bias(node, graph)
    if bias is not None:
        entries.append((f"1>{node.name}", -bias))
    entries.append((node.name, np.ones(graph.sizes[node.name])))
    return entries


def graph_rows(graph, pattern_row, out_jacobian, reduced, static, split=None):
    """Block rows of a graph network's coboundary for one sample, in edge order (as :func:`coboundary_rows`).

    ``pattern_row`` is ``{node: pattern of this sample}``; ``static`` holds the
    rows of the pattern-independent nodes (:func:`static_rows`), shared by every
    sample so that their Gram products are computed once per batch; ``split``
    the rows replacing the hyperedges of ``skip_encoding="edges"``
    (:func:`~sheaflinalg.sheaf.skip_edges.split_static_rows`), shared likewise.
    """
    rows = []
    for node in graph.nodes:
        if split and node.name in split:
            rows += split[node.name]
        else:
            rows.append((f"e_{node.name}", static[node.name] if node.name in static
                         else node_row(node, graph, pattern_row[node.name])))
    if not reduced:
        out = graph.output_node
        rows.append(("e_y", [(out, -out_jacobian), ("yhat", np.ones(graph.sizes[out]))]))
    return rows


def static_rows(graph):
    """``{node: block row}`` of every node whose restriction maps do not depend on the pattern."""
    return {node.name: node_row(node, graph) for node in graph.nodes if not node.spec.pattern_dependent}


def check_pattern(net, pattern, n_samples):
    """A validated frozen pattern: a list of masks (chains) or ``{node: array}`` (graph networks)."""
    if net.is_graph:
        return normalise_graph_pattern(net.graph, pattern, n_samples)
    return normalise_pattern(net, pattern, n_samples)


def forward_pattern(net, X):
    """The forward pass's own pattern of the (validated, flat) inputs ``X``."""
    if net.is_graph:
        return net.evaluate(X).pattern
    return [z >= 0 for z in net.forward_states(X)[0][:-1]]


def check_system(system, name="system"):
    """Return ``system`` if it is an assembled :class:`SheafSystem`, else a TypeError naming what was got.

    Examples
    --------
    >>> check_system("x")
    Traceback (most recent call last):
    ...
    TypeError: system must be a sheaflinalg.SheafSystem (from sl.assemble), got str 'x'
    """
    hint = " (assemble one with sl.assemble(net, x))" if isinstance(system, Network) else ""
    return check_type(system, SheafSystem, name, "a sheaflinalg.SheafSystem (from sl.assemble)", hint)


class SheafSystem:
    """The assembled neural sheaf of one sample or a batch (block diagonal, sample-major).

    Matrices are built on first access and cached.  Use :func:`assemble`.

    Attributes
    ----------
    layout : Layout
        Layout of one sample; sample ``s`` occupies rows/columns
        ``[s * n, (s + 1) * n)`` of every matrix, with ``n`` the layout size.
    graph : Graph or None
        The graph whose rows were assembled (None: the chain's own rows).
    pattern : list of ndarray or dict
        Hidden-layer masks, shape (n_samples, n_l); for a graph network
        ``{node: (n_samples, n) array}`` (masks, max-pool argmax positions).
    u : ndarray
        Boundary vector ``(x, 1, ..., 1)`` of every sample, concatenated.
    edge_offset : ndarray
        Constant term of the linearised output edge (zero for identity output):
        the coboundary of the linearised sheaf is
        ``delta_free @ omega + delta_boundary @ u + edge_offset``.
    linearisation_point : ndarray, shape (n_samples, n_out)
        ``z(k+1)`` of the pattern's harmonic extension, where a nonlinear
        output is linearised (``-J_phi`` in the ``e_y`` block row).
    skip_encoding : {"sum", "edges"}
        How nodes with several parents are encoded
        (:mod:`sheaflinalg.sheaf.skip_edges`).  ``harmonic`` is the pattern's
        forward substitution either way; under ``"edges"`` the harmonic
        extension of the tall ``delta_Omega`` is
        :func:`sheaflinalg.sheaf.least_squares.least_squares_extension`.
    """

    def __init__(self, net, X, pattern, reduced=False, as_graph=False, skip_encoding="sum"):
        check_network(net, graphs=True)
        self.network = net
        self.X = X
        self.n_samples = X.shape[0]
        self.reduced = bool(reduced)
        self.skip_encoding = check_skip_encoding(skip_encoding)
        # as_graph: a chain assembled through its chain graph (the graph rows; tests compare both)
        self.graph = net.graph if net.is_graph or as_graph else None
        self.pattern = pattern
        if self.graph is None:
            self.layout = Layout.for_network(net, reduced=reduced)
            h = harmonic_extension(net, X, pattern=pattern)
            zs = h.preactivations[-1]
        else:
            self.layout = Layout.from_graph(self.graph, reduced=reduced, skip_encoding=skip_encoding)
            h = graph_extension(self.graph, X, pattern)
            zs = h.node(self.graph.output_node)
        self.harmonic = h
        self._linearise(zs)
        self.u = np.concatenate([self.layout.boundary_values(x) for x in X])

    def _linearise(self, zs):
        # Block rows and output-edge offset of the sheaf linearised at z(k+1) = zs.
        net, pattern, lay = self.network, self.pattern, self.layout
        self.linearisation_point = zs
        self._jacobians = [output_jacobian(net.output, z) for z in self.linearisation_point]
        if self.graph is None:
            self._rows = [coboundary_rows(net, lay, [m[s] for m in pattern], self._jacobians[s], self.reduced)
                          for s in range(self.n_samples)]
            self._shared_rows(net)
        else:
            static = static_rows(self.graph)
            split = split_static_rows(self.graph, static, self.skip_encoding)
            self._rows = [graph_rows(self.graph, {k: v[s] for k, v in pattern.items()}, self._jacobians[s],
                                     self.reduced, static, split) for s in range(self.n_samples)]
        offset = np.zeros((self.n_samples, lay.n_edges))
        if not self.reduced and net.output != "identity":
            zs = self.linearisation_point
            phi = activations.apply(net.output, zs)
            for s in range(self.n_samples):
                J = self._jacobians[s]
                Jz = J * zs[s] if J.ndim == 1 else J @ zs[s]
                offset[s, lay.edge("e_y")] = Jz - phi[s]
        self.edge_offset = offset.ravel()

    def _shared_rows(self, net):
        # Weight-edge blocks do not depend on the sample: share the arrays so
        # that Gram products of them are computed once per batch.
        first = self._rows[0]
        weights = {b.name for b in self.layout.edge_blocks if b.kind == "weight"}
        shared = {name: entries for name, entries in first if name in weights}
        for rows in self._rows[1:]:
            for i, (name, _) in enumerate(rows):
                if name in shared:
                    rows[i] = (name, shared[name])

    def _describe(self):
        return f"graph={self.graph!r}" if self.graph is not None else f"dims={self.network.dims}"

    def __repr__(self):
        return (f"SheafSystem({self._describe()}, output={self.network.output!r}, "
                f"n_samples={self.n_samples}, reduced={self.reduced})")

    # ------------------------------------------------------------ helpers
    def _offsets(self, which):
        lay = self.layout
        if which == "free":
            return {b.name: b.offset for b in lay.free_blocks}, lay.n_free
        if which == "boundary":
            return {b.name: b.offset for b in lay.boundary_blocks}, lay.n_boundary
        return {b.name: b.offset for b in lay.full_blocks}, lay.n_full

    def _coboundary(self, which):
        lay = self.layout
        cols, width = self._offsets(which)
        blocks = []
        for s, rows in enumerate(self._rows):
            for edge, entries in rows:
                r0 = s * lay.n_edges + lay.edge_block(edge).offset
                blocks.extend((r0, s * width + cols[c], B) for c, B in entries if c in cols)
        return csr_from_blocks(blocks, (self.n_samples * lay.n_edges, self.n_samples * width))

    def _gram(self, left, right):
        lcols, lwidth = self._offsets(left)
        rcols, rwidth = self._offsets(right)
        cache = {}
        blocks = []
        for s, rows in enumerate(self._rows):
            for _, entries in rows:
                for ci, Bi in entries:
                    if ci not in lcols:
                        continue
                    for cj, Bj in entries:
                        if cj not in rcols:
                            continue
                        key = (id(Bi), id(Bj))
                        if key not in cache:
                            cache[key] = (Bi, Bj, transpose_times(Bi, Bj))
                        blocks.append((s * lwidth + lcols[ci], s * rwidth + rcols[cj], cache[key][2]))
        return csr_from_blocks(blocks, (self.n_samples * lwidth, self.n_samples * rwidth))

    # ------------------------------------------------------------ matrices
    @cached_property
    def delta(self):
        """Full coboundary: edges x all vertex coordinates (CSR)."""
        return self._coboundary("full")

    @cached_property
    def delta_free(self):
        """``delta_Omega``: edges x free coordinates, square and unit lower triangular (CSR); tall with
        ``skip_encoding="edges"`` on a network with ``add`` or ``concat`` nodes."""
        return self._coboundary("free")

    @cached_property
    def delta_boundary(self):
        """``delta_U``: edges x boundary coordinates (CSR)."""
        return self._coboundary("boundary")

    @cached_property
    def laplacian(self):
        """Full sheaf Laplacian ``delta^T delta`` on all vertex coordinates (CSR)."""
        return self._gram("full", "full")

    @cached_property
    def laplacian_free(self):
        """``L[Omega, Omega] = delta_Omega^T delta_Omega`` (CSR)."""
        return self._gram("free", "free")

    @cached_property
    def laplacian_boundary(self):
        """``L[Omega, U] = delta_Omega^T delta_U`` (CSR)."""
        return self._gram("free", "boundary")

    @cached_property
    def laplacian_reduced(self):
        """Block-tridiagonal reduced Laplacian of appendix A on ``z1, a1, ..., z(k+1)`` (CSR).

        It is ``delta'^T delta'`` with the output edge and ``yhat`` dropped, and
        equals the Schur complement of :attr:`laplacian_free` over ``yhat``.
        """
        if self.reduced:
            return self.laplacian_free
        return SheafSystem(self.network, self.X, self.pattern, reduced=True, as_graph=self.graph is not None,
                           skip_encoding=self.skip_encoding).laplacian_free

    @property
    def reduced_layout(self):
        """Layout of :attr:`laplacian_reduced`."""
        if self.graph is not None:
            return Layout.from_graph(self.graph, reduced=True, skip_encoding=self.skip_encoding)
        return Layout.for_network(self.network, reduced=True)


class AugmentedSheafSystem(SheafSystem):
    """A neural sheaf with hard pins, soft-pin edges, reluctance edges and/or freed inputs.

    Built by :func:`assemble` when ``pins``, ``soft_pins``, ``reluctance`` or
    ``free_inputs`` is given (pin format: :mod:`sheaflinalg.sheaf.pins`).  Per sample:

    * the 0-cochain is the layout's full cochain followed by the soft-pin
      stubborn vertices (one coordinate per soft pin) and the reluctance
      anchors (one per free coordinate);
    * free coordinates (``Omega``) are the layout's free coordinates minus the
      hard-pinned ones, plus the freed input coordinates, in full-cochain order
      (so freed inputs come first); all other coordinates form ``U``, in
      full-cochain order (pinned coordinates sit where they are in the
      cochain), then the stubborn vertices, then the anchors;
    * edges are the layout's edges, then one soft-pin edge per soft pin
      (``sqrt(gamma) (omega_j - p_j)``), then one reluctance edge per free
      coordinate (``sqrt(lam) (omega_j - anchor_j)``), so ``delta_free`` is
      tall when soft pins or reluctance are present.

    Batches are block diagonal, sample-major, as for :class:`SheafSystem`.

    Attributes
    ----------
    hard_pins, soft_pins : PinSet
    reluctance : float
        ``lam`` (0 when absent).
    free_inputs : ndarray of int
        Freed input coordinates.
    free_labels, boundary_labels, edge_labels : list of str
        Labels of one sample's free and boundary coordinates and edge rows.
    layout_free_index : ndarray of int
        For each free coordinate of one sample, its position in the layout's
        free order (``-1`` for a freed input).
    n_free_sample, n_boundary_sample, n_edges_sample : int
    """

    def __init__(self, net, X, pattern, reduced, hard, soft, lam, anchor, free_inputs, linearise_at=None,
                 as_graph=False):
        check_network(net, graphs=True)
        super().__init__(net, X, pattern, reduced, as_graph)
        if linearise_at is not None:
            self._linearise(np.asarray(linearise_at, dtype=np.float64).reshape(self.n_samples, -1))
        lay = self.layout
        M = self.n_samples
        self.hard_pins, self.soft_pins, self.reluctance = hard, soft, float(lam)
        self.free_inputs = np.asarray(free_inputs, dtype=np.int64)
        full_free = lay.free_index
        x0 = lay.full("x").start
        keep = np.ones(lay.n_free, dtype=bool)
        keep[hard.index] = False
        free_pos = np.concatenate([x0 + self.free_inputs, full_free[keep]])
        layout_idx = np.concatenate([np.full(self.free_inputs.size, -1, dtype=np.int64),
                                     np.flatnonzero(keep).astype(np.int64)])
        n_soft = soft.size
        n_rel = free_pos.size if lam > 0 else 0
        n_full = lay.n_full + n_soft + n_rel
        is_free = np.zeros(n_full, dtype=bool)
        is_free[free_pos] = True
        self._free_pos = np.flatnonzero(is_free)
        self._bnd_pos = np.flatnonzero(~is_free)
        order = np.argsort(free_pos)
        self.layout_free_index = layout_idx[order]
        self._n_full_aug = n_full
        self._n_soft, self._n_rel = n_soft, n_rel
        self.n_free_sample = self._free_pos.size
        self.n_boundary_sample = self._bnd_pos.size
        self.n_edges_sample = lay.n_edges + n_soft + n_rel

        full_labels = (lay.full_labels + [f"pin_target[{l}]" for l in soft.labels]
                       + [f"anchor[{l}]" for l in (np.array(lay.full_labels)[self._free_pos]).tolist()][:n_rel])
        self.free_labels = [full_labels[i] for i in self._free_pos]
        self.boundary_labels = [full_labels[i] for i in self._bnd_pos]
        self.edge_labels = (lay.edge_labels + [f"e_pin[{l}]" for l in soft.labels]
                            + [f"e_rel[{l}]" for l in self.free_labels][:n_rel])

        # Values of the full augmented cochain at the boundary coordinates.
        vals = np.zeros((M, n_full))
        vals[:, lay.full("x")] = X
        for b in lay.boundary_blocks:
            if b.kind == "ones":
                vals[:, lay.full(b.name)] = 1.0
        vals[:, full_free[hard.index]] = hard.values
        vals[:, lay.n_full:lay.n_full + n_soft] = soft.values
        if n_rel:
            anc = np.zeros((M, free_pos.size))
            inner = self.layout_free_index >= 0
            anc[:, inner] = anchor[:, self.layout_free_index[inner]]
            vals[:, lay.n_full + n_soft:] = anc
        self.boundary_values_full = vals
        self.u = np.ascontiguousarray(vals[:, self._bnd_pos]).ravel()
        self.edge_offset = np.concatenate(
            [self.edge_offset.reshape(M, lay.n_edges), np.zeros((M, n_soft + n_rel))], axis=1).ravel()

    def __repr__(self):
        return (f"AugmentedSheafSystem({self._describe()}, output={self.network.output!r}, "
                f"n_samples={self.n_samples}, reduced={self.reduced}, hard_pins={self.hard_pins.size}, "
                f"soft_pins={self.soft_pins.size}, reluctance={self.reluctance}, "
                f"free_inputs={self.free_inputs.size})")

    def _extra_rows(self):
        # (row, col, value) triplets of the soft-pin and reluctance edges of one sample.
        lay = self.layout
        soft = self.soft_pins
        rows, cols, vals = [], [], []
        if soft.size:
            g = np.sqrt(soft.gamma)
            r = lay.n_edges + np.arange(soft.size)
            rows += [r, r]
            cols += [lay.free_index[soft.index], lay.n_full + np.arange(soft.size)]
            vals += [g, -g]
        if self._n_rel:
            g = np.full(self._n_rel, np.sqrt(self.reluctance))
            r = lay.n_edges + soft.size + np.arange(self._n_rel)
            rows += [r, r]
            cols += [self._free_pos, lay.n_full + soft.size + np.arange(self._n_rel)]
            vals += [g, -g]
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)

    @cached_property
    def delta_augmented_full(self):
        """Coboundary on the whole augmented 0-cochain (cochain, stubborn vertices, anchors) (CSR)."""
        lay = self.layout
        M, ne, nf = self.n_samples, self.n_edges_sample, self._n_full_aug
        cols = {b.name: b.offset for b in lay.full_blocks}
        blocks = []
        for s, rows in enumerate(self._rows):
            for edge, entries in rows:
                r0 = s * ne + lay.edge_block(edge).offset
                blocks.extend((r0, s * nf + cols[c], B) for c, B in entries)
        std = csr_from_blocks(blocks, (M * ne, M * nf))
        r, c, v = self._extra_rows()
        if r.size == 0:
            return std
        shift = np.arange(M)
        rr = (r[None, :] + ne * shift[:, None]).ravel()
        cc = (c[None, :] + nf * shift[:, None]).ravel()
        vv = np.tile(v, M)
        extra = sp.coo_matrix((vv, (rr, cc)), shape=(M * ne, M * nf)).tocsr()
        out = (std + extra).tocsr()
        out.sort_indices()
        return out

    def _columns(self, positions):
        nf = self._n_full_aug
        return (positions[None, :] + nf * np.arange(self.n_samples)[:, None]).ravel()

    @cached_property
    def delta(self):
        """Coboundary on the layout's full 0-cochain and the augmented vertices (same as
        :attr:`delta_augmented_full`): columns are per sample the layout's full cochain, the
        soft-pin stubborn vertices, then the reluctance anchors."""
        return self.delta_augmented_full

    @cached_property
    def delta_free(self):
        """``delta_Omega``: edges (incl. soft-pin and reluctance edges) x free coordinates (CSR)."""
        return self.delta_augmented_full[:, self._columns(self._free_pos)].tocsr()

    @cached_property
    def delta_boundary(self):
        """``delta_U``: edges x boundary coordinates (pinned, stubborn and anchor ones included) (CSR)."""
        return self.delta_augmented_full[:, self._columns(self._bnd_pos)].tocsr()

    @cached_property
    def laplacian(self):
        """``delta^T delta`` on the whole augmented 0-cochain (CSR)."""
        d = self.delta
        return (d.T @ d).tocsr()

    @cached_property
    def laplacian_free(self):
        """``L[Omega, Omega] = delta_Omega^T delta_Omega`` of the augmented sheaf (CSR)."""
        d = self.delta_free
        return (d.T @ d).tocsr()

    @cached_property
    def laplacian_boundary(self):
        """``L[Omega, U] = delta_Omega^T delta_U`` of the augmented sheaf (CSR)."""
        return (self.delta_free.T @ self.delta_boundary).tocsr()

    @cached_property
    def laplacian_reduced(self):
        """Not defined for augmented systems: assemble with ``reduced=True`` instead."""
        if self.reduced:
            return self.laplacian_free
        raise ValueError("laplacian_reduced is not defined for an augmented (pinned/regularised) "
                         "system; call assemble(..., reduced=True, pins=...) instead")

    def rhs(self):
        """Right-hand side ``-delta_Omega^T (delta_U u + edge_offset)`` of the normal equations."""
        return -(self.delta_free.T @ (self.delta_boundary @ self.u + self.edge_offset))


def system_bytes(net, n_samples):
    """Estimate of the memory of an assembled batch: ``delta`` (with the temporaries of its
    construction) and ``L[Omega, Omega]``, whose blocks ``W_l^T W_l`` are dense, in CSR (16 bytes an entry).

    For a graph network ``delta`` has the restriction maps' nonzeros and the
    Laplacian at most their Gram blocks' bound
    (:func:`~sheaflinalg.sheaf.restriction_maps.map_nnz`) plus the products
    with the other entries of each row.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> system_bytes(sl.Network.random([2, 30, 1], seed=0), 1000) < 2**25
    True
    """
    if net.is_graph:
        nnz_delta, nnz_laplacian = _graph_nnz(net.graph)
    else:
        dims = net.dims
        n_free = 2 * sum(dims[1:-1]) + 2 * dims[-1]
        nnz_delta = net.n_parameters + 2 * n_free
        nnz_laplacian = sum(n * n for n in dims[:-1]) + 2 * net.n_parameters + 3 * n_free
    return 16 * n_samples * (3 * nnz_delta + nnz_laplacian)


def _graph_nnz(graph):
    """Nonzeros of one sample's ``delta`` and a bound on those of its Laplacian."""
    nnz_delta = nnz_laplacian = 0
    for node in graph.nodes:
        n = graph.sizes[node.name]
        maps, gram = map_nnz(node, graph)
        entries = len(node.inputs) + (2 if node.spec.has_bias else 1)
        nnz_delta += maps + n
        # the maps' Gram blocks, their products with the other entries of the row, the diagonal ones
        nnz_laplacian += len(node.inputs) * gram + 2 * entries * maps + entries * entries * n
    n_out = graph.n_outputs
    return nnz_delta + 2 * n_out, nnz_laplacian + 4 * n_out * n_out


def assemble(net, x, pattern=None, reduced=False, pins=None, soft_pins=None, reluctance=None,
             free_inputs=None, linearise_at=None, skip_encoding="sum"):
    """Assemble the neural sheaf of ``net`` at input(s) ``x``.

    Parameters
    ----------
    net : Network
        A chain or a graph network: every node has one defining edge
        ``x_v - sum_u F_(u->v) x_u - diag(b_v) 1_v`` (rows from
        :mod:`sheaflinalg.sheaf.restriction_maps`), laid out by
        :meth:`Layout.from_graph`.
    x : array_like, shape (n_0,) or (n_samples, n_0)
        One input or a batch (assembled block-diagonally, sample-major); a
        graph network also takes ``input_shape`` or ``(n_samples, *input_shape)``.
    pattern : sequence of array_like or dict, optional
        One boolean mask per hidden layer, shape ``(n_l,)`` or ``(n_samples, n_l)``,
        freezing the activation pattern (``True`` = active); for a graph network a
        dict ``{node: array}`` over its pattern nodes (masks; max-pool argmax
        positions in the parent's stalk).  Default: each sample's own
        forward-pass pattern (``z >= 0`` active, first maximum of a window).
    reduced : bool
        Assemble the reduced sheaf without ``v_y`` and ``e_y``.
    pins : dict, optional
        Hard pins ``{selector: values}`` (format: :mod:`sheaflinalg.sheaf.pins`):
        the selected coordinates move from ``Omega`` to ``U``.
    soft_pins : SoftPins or (targets, gamma), optional
        Soft-pin (penalty) edges of strength ``gamma`` (paper eq. pinning-maps).
    reluctance : float or Reluctance, optional
        Reluctance edges ``sqrt(lam) I`` from every free coordinate to an
        anchor (appendix C.2).
    free_inputs : sequence of int, optional
        Input coordinates moved from ``U`` to ``Omega`` (imputation).
    linearise_at : array_like, shape (n_samples, n_out), optional
        Linearise a nonlinear output at this ``z(k+1)`` instead of the
        pattern's harmonic extension (augmented systems only).
    skip_encoding : {"sum", "edges"}
        ``"sum"``: one defining hyperedge per node, ``delta_Omega`` square and
        unit lower triangular.  ``"edges"``: the paper's encoding, one
        two-endpoint edge per parent of an ``add`` or ``concat`` node
        (:mod:`sheaflinalg.sheaf.skip_edges`), ``delta_Omega`` tall (not with
        pins, soft pins, reluctance, free inputs or ``linearise_at``).

    Returns
    -------
    SheafSystem or AugmentedSheafSystem
        ``delta``, ``delta_free``, ``delta_boundary``, ``u``, ``laplacian``,
        ``laplacian_free``, ``laplacian_boundary``, ``laplacian_reduced`` and
        ``layout`` (matrices are CSR float64, built lazily on first access).
        With any of ``pins``, ``soft_pins``, ``reluctance``, ``free_inputs``
        an :class:`AugmentedSheafSystem` (``delta_free`` tall with the extra edges).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> s = sl.assemble(net, [0.5, -1.0])
    >>> s.delta_free.shape
    (8, 8)
    >>> bool((s.delta_free.diagonal() == 1.0).all())
    True
    """
    check_network(net, graphs=True)
    X, _ = as_samples(x, net.n_inputs, name="x", input_shape=net.input_shape)
    reduced = check_bool(reduced, "reduced")
    M, n_out = X.shape[0], net.n_outputs
    augmented = not (pins is None and soft_pins is None and reluctance is None and free_inputs is None
                     and linearise_at is None)
    if check_skip_encoding(skip_encoding) == "edges" and augmented:
        raise ValueError("skip_encoding='edges' takes no pins, soft_pins, reluctance, free_inputs or linearise_at "
                         "(they are defined on the default encoding, skip_encoding='sum')")
    if augmented:
        r = resolve_pins(net, X, Layout.for_network(net, reduced), pins, soft_pins, reluctance, free_inputs)
    if linearise_at is not None:
        linearise_at = as_float64(linearise_at, "linearise_at")
        if linearise_at.shape not in ((M, n_out), (n_out,)):
            raise ValueError(f"linearise_at must have shape ({M}, {n_out}) or ({n_out},), got {linearise_at.shape}")
        linearise_at = np.ascontiguousarray(np.broadcast_to(linearise_at, (M, n_out)))
    pattern = None if pattern is None else check_pattern(net, pattern, M)
    check_memory(system_bytes(net, M), f"the sparse sheaf system of {M} samples",
                 "assemble fewer samples at a time (samples are independent blocks)")
    if pattern is None:
        pattern = forward_pattern(net, X)
    if not augmented:
        return SheafSystem(net, X, pattern, reduced=reduced, skip_encoding=skip_encoding)
    return AugmentedSheafSystem(net, X, pattern, reduced, r.hard, r.soft, r.lam, r.anchor, r.free_inputs,
                                linearise_at)
