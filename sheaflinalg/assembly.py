"""Assembly of the neural sheaf's coboundary and Laplacian blocks as scipy.sparse CSR.

Each edge contributes one block row ``(delta x)_e = F_down x_down - F_up x_up``;
the matrices are written straight from those blocks (see
:mod:`sheaflinalg.sparse_blocks`), so assembly time and memory grow with the
number of weights, never with ``N**2``.
"""

from functools import cached_property

import numpy as np

from . import activations
from .layout import Layout
from .sparse_blocks import csr_from_blocks, transpose_times
from .validation import as_samples


def normalise_pattern(net, pattern, n_samples):
    """Validate an activation pattern and return it as a list of (n_samples, n_l) bool arrays.

    ``pattern`` is a sequence with one entry per hidden layer; each entry has
    shape ``(n_l,)`` (shared by every sample) or ``(n_samples, n_l)``.
    Values must be boolean or 0/1.
    """
    k = net.n_hidden
    if len(pattern) != k:
        raise ValueError(f"pattern needs one mask per hidden layer ({k}), got {len(pattern)}")
    out = []
    for l, (mask, n) in enumerate(zip(pattern, net.dims[1:-1]), start=1):
        m = np.asarray(mask)
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


def coboundary_rows(net, mask_row, out_jacobian, reduced):
    """Block rows of the coboundary of one sample, in edge order.

    Returns a list ``[(edge_name, [(coordinate_block_name, block), ...]), ...]``
    where a block is a dense matrix or a 1-D diagonal.  ``mask_row`` holds the
    hidden-layer masks of this sample; ``out_jacobian`` the linearised output
    restriction map (1-D diagonal or dense), ignored when ``reduced``.
    """
    k = net.n_hidden
    W, b = net.weights, net.biases
    rows = [("e_z1", [("x", -W[0]), ("1@x", -b[0]), ("z1", np.ones(net.dims[1]))])]
    for l in range(1, k + 1):
        rows.append((f"e_a{l}", [(f"z{l}", -mask_row[l - 1].astype(np.float64)),
                                 (f"a{l}", np.ones(net.dims[l]))]))
        rows.append((f"e_z{l + 1}", [(f"a{l}", -W[l]), (f"1@a{l}", -b[l]),
                                     (f"z{l + 1}", np.ones(net.dims[l + 1]))]))
    if not reduced:
        rows.append(("e_y", [(f"z{k + 1}", -out_jacobian), ("yhat", np.ones(net.dims[-1]))]))
    return rows


def output_jacobian(output, z):
    """Linearised output restriction map at ``z``: diagonal (1-D) or dense for softmax."""
    if output == "softmax":
        return activations.jacobian(output, z)
    if output == "identity":
        return np.ones(z.size)
    return np.diag(activations.jacobian(output, z)).copy()


class SheafSystem:
    """The assembled neural sheaf of one sample or a batch (block diagonal, sample-major).

    Matrices are built on first access and cached.  Use :func:`assemble`.

    Attributes
    ----------
    layout : Layout
        Layout of one sample; sample ``s`` occupies rows/columns
        ``[s * n, (s + 1) * n)`` of every matrix, with ``n`` the layout size.
    pattern : list of ndarray
        Hidden-layer masks, shape (n_samples, n_l).
    u : ndarray
        Boundary vector ``(x, 1, ..., 1)`` of every sample, concatenated.
    edge_offset : ndarray
        Constant term of the linearised output edge (zero for identity output):
        the coboundary of the linearised sheaf is
        ``delta_free @ omega + delta_boundary @ u + edge_offset``.
    linearisation_point : ndarray, shape (n_samples, n_out)
        ``z(k+1)`` of the pattern's harmonic extension, where a nonlinear
        output is linearised (``-J_phi`` in the ``e_y`` block row).
    """

    def __init__(self, net, X, pattern, reduced=False):
        from .harmonic import harmonic_extension

        self.network = net
        self.X = X
        self.n_samples = X.shape[0]
        self.reduced = bool(reduced)
        self.layout = Layout(net.dims, reduced=reduced)
        self.pattern = pattern
        h = harmonic_extension(net, X, pattern=pattern)
        self.harmonic = h
        self.linearisation_point = h.preactivations[-1]
        self._jacobians = [output_jacobian(net.output, z) for z in self.linearisation_point]
        self._rows = [coboundary_rows(net, [m[s] for m in pattern], self._jacobians[s], self.reduced)
                      for s in range(self.n_samples)]
        self._shared_rows(net)
        lay = self.layout
        self.u = np.concatenate([lay.boundary_values(x) for x in X])
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
        shared = {name: entries for name, entries in first if name.startswith("e_z")}
        for rows in self._rows[1:]:
            for i, (name, _) in enumerate(rows):
                if name in shared:
                    rows[i] = (name, shared[name])

    def __repr__(self):
        return (f"SheafSystem(dims={self.network.dims}, output={self.network.output!r}, "
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
        """``delta_Omega``: edges x free coordinates, square and unit lower triangular (CSR)."""
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
        return SheafSystem(self.network, self.X, self.pattern, reduced=True).laplacian_free

    @property
    def reduced_layout(self):
        """Layout of :attr:`laplacian_reduced`."""
        return Layout(self.network.dims, reduced=True)


def assemble(net, x, pattern=None, reduced=False):
    """Assemble the neural sheaf of ``net`` at input(s) ``x``.

    Parameters
    ----------
    net : Network
    x : array_like, shape (n_0,) or (n_samples, n_0)
        One input or a batch (assembled block-diagonally, sample-major).
    pattern : sequence of array_like, optional
        One boolean mask per hidden layer, shape ``(n_l,)`` or ``(n_samples, n_l)``,
        freezing the activation pattern (``True`` = active).  Default: each
        sample's own forward-pass pattern (``z >= 0`` active).
    reduced : bool
        Assemble the reduced sheaf without ``v_y`` and ``e_y``.

    Returns
    -------
    SheafSystem
        ``delta``, ``delta_free``, ``delta_boundary``, ``u``, ``laplacian``,
        ``laplacian_free``, ``laplacian_boundary``, ``laplacian_reduced`` and
        ``layout`` (matrices are CSR float64, built lazily on first access).

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
    X, _ = as_samples(x, net.dims[0], name="x")
    if pattern is None:
        pattern = [z >= 0 for z in net.forward_states(X)[0][:-1]]
    else:
        pattern = normalise_pattern(net, pattern, X.shape[0])
    return SheafSystem(net, X, pattern, reduced=reduced)
