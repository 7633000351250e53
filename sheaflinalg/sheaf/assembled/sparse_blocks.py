"""Sparse matrices built directly from dense and diagonal blocks.

A *block* is a 2-D ndarray (dense), a 1-D ndarray (a diagonal) or a
``scipy.sparse`` matrix (the convolution, pooling and selection maps of graph
networks, :mod:`sheaflinalg.network.ops`).
Matrices are written straight into COO triplets and converted to CSR once,
so no dense N x N intermediate ever exists.
"""

import numpy as np
import scipy.sparse as sp


def block_shape(block):
    """``(rows, cols)`` of a dense, diagonal or sparse block."""
    return (block.shape[0], block.shape[0]) if block.ndim == 1 else block.shape


def _as_sparse(block):
    return sp.diags(block, format="csr") if block.ndim == 1 else sp.csr_matrix(block)


def transpose_times(left, right):
    """``left.T @ right`` for dense, diagonal or sparse blocks, keeping diagonals diagonal (sparse stays sparse).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> transpose_times(sp.csr_matrix(np.array([[1.0, 2.0]])), np.array([3.0])).toarray()
    array([[3.],
           [6.]])
    """
    if sp.issparse(left) or sp.issparse(right):
        return (_as_sparse(left).T @ _as_sparse(right)).tocsr()
    if left.ndim == 1 and right.ndim == 1:
        return left * right
    if left.ndim == 1:
        return left[:, None] * right
    if right.ndim == 1:
        return left.T * right[None, :]
    return left.T @ right


def csr_from_blocks(blocks, shape):
    """Assemble a CSR float64 matrix from ``(row_offset, col_offset, block)`` triples.

    Overlapping blocks are summed; entries equal to zero are dropped.

    Examples
    --------
    >>> import numpy as np
    >>> csr_from_blocks([(0, 0, np.ones(2)), (1, 0, np.array([[2.0, 3.0]]))], (2, 2)).toarray()
    array([[1., 0.],
           [2., 4.]])
    """
    n_rows, n_cols = shape
    index_dtype = np.int32 if max(n_rows, n_cols) < 2**31 - 1 else np.int64
    rows, cols, vals = [], [], []
    nnz = 0
    for r0, c0, block in blocks:
        if sp.issparse(block):
            coo = block.tocoo()
            rows.append(coo.row.astype(index_dtype) + r0)
            cols.append(coo.col.astype(index_dtype) + c0)
            vals.append(coo.data)
        elif block.ndim == 1:
            idx = np.arange(block.size, dtype=index_dtype)
            rows.append(idx + r0)
            cols.append(idx + c0)
            vals.append(block)
        else:
            n, m = block.shape
            rows.append(np.repeat(np.arange(r0, r0 + n, dtype=index_dtype), m))
            cols.append(np.tile(np.arange(c0, c0 + m, dtype=index_dtype), n))
            vals.append(block.ravel())
        nnz += vals[-1].size
    if nnz >= 2**31 - 1:
        index_dtype = np.int64
    if not blocks:
        return sp.csr_matrix(shape, dtype=np.float64)
    coo = sp.coo_matrix(
        (np.concatenate(vals).astype(np.float64, copy=False),
         (np.concatenate(rows).astype(index_dtype, copy=False),
          np.concatenate(cols).astype(index_dtype, copy=False))),
        shape=shape)
    out = coo.tocsr()
    out.sum_duplicates()
    out.eliminate_zeros()
    return out
