"""The neural sheaf with hard pins, soft-pin edges, reluctance edges and freed inputs
(:class:`AugmentedSheafSystem`)."""

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ...network.model import check_network
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING
from .sparse_blocks import csr_from_blocks
from .system import SheafSystem


class AugmentedSheafSystem(SheafSystem):
    """A neural sheaf with hard pins, soft-pin edges, reluctance edges and/or freed inputs.

    Built by :func:`assemble` when ``pins``, ``soft_pins``, ``reluctance`` or
    ``free_inputs`` is given (pin format: :mod:`sheaflinalg.sheaf.pins.specs`).  Per sample:

    * the 0-cochain is the layout's full cochain followed by the soft-pin
      stubborn vertices (one coordinate per soft pin) and the reluctance
      anchors (one per free coordinate);
    * free coordinates (``Omega``) are the layout's free coordinates minus the
      hard-pinned ones, plus the freed input coordinates, in full-cochain order
      (so freed inputs come first; the same under either skip encoding); all other coordinates form ``U``, in
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
                 as_graph=False, skip_encoding=DEFAULT_SKIP_ENCODING):
        check_network(net, graphs=True)
        super().__init__(net, X, pattern, reduced, as_graph, skip_encoding)
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
