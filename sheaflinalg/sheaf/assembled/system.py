"""The assembled neural sheaf (:class:`SheafSystem`): its coboundary and Laplacian blocks as scipy.sparse CSR.

Each edge contributes one block row ``(delta x)_e = F_down x_down - F_up x_up``
(:mod:`sheaflinalg.sheaf.assembled.block_rows`); the matrices are written straight from those blocks (see
:mod:`sheaflinalg.sheaf.assembled.sparse_blocks`), so assembly time and memory grow with the
number of weights, never with ``N**2``.
"""

from functools import cached_property

import numpy as np

from ..._common.validation import check_type
from ...network import activations
from ...network.model import Network, check_network
from .block_rows import graph_rows, static_rows
from ..harmonic import graph_extension, harmonic_extension
from ..layout import Layout
from ..patterns import output_jacobian
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding, split_static_rows
from .sparse_blocks import csr_from_blocks, transpose_times
from ...network.paths import GRAPH, engine


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
        (:mod:`sheaflinalg.sheaf.skip_edges.encoding`).  ``harmonic`` is the pattern's
        forward substitution either way; under ``"edges"`` the harmonic
        extension of the tall ``delta_Omega`` is
        :func:`sheaflinalg.sheaf.skip_edges.least_squares.least_squares_extension`.
    """

    def __init__(self, net, X, pattern, reduced=False, as_graph=False, skip_encoding=DEFAULT_SKIP_ENCODING):
        check_network(net, graphs=True)
        self.network = net
        self.X = X
        self.n_samples = X.shape[0]
        self.reduced = bool(reduced)
        self.skip_encoding = check_skip_encoding(skip_encoding)
        # as_graph: a chain assembled through its chain graph (the graph rows; tests compare both)
        self.graph = net.graph if engine(net) == GRAPH or as_graph else None
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
            self._rows = self._chain_rows(net.graph, pattern)
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

    def _chain_rows(self, graph, pattern):
        # A chain's rows are its graph's (the weight rows shared by every sample, their Gram products
        # computed once per batch), the ones blocks named as in the chain layout (the paper's 1@x, 1@a<l>).
        lay, static = self.layout, static_rows(graph)
        if lay.paper:
            ones = {f"1>{lay.z(l + 1)}": lay.ones(l) for l in range(len(lay.dims) - 1)}
            static = {v: [(ones.get(u, u), block) for u, block in row] for v, row in static.items()}
        masks = dict(zip(graph.pattern_nodes, pattern))
        return [graph_rows(graph, {v: m[s] for v, m in masks.items()}, self._jacobians[s], self.reduced, static)
                for s in range(self.n_samples)]

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
