"""``linear``: ``x_v = W x_u + b`` on the last axis of the parent (PyTorch's Linear, ONNX's Gemm and MatMul).

A parent of shape ``(..., in)`` is ``rows = prod(...)`` vectors of ``in`` features, each mapped by the
same ``W``: the restriction map is ``kron(I_rows, W)`` (``W`` itself on a flat parent, the MLP's case).
"""

import numpy as np
import scipy.sparse as sp

from .rule import OpRule


def spectral_norm(W):
    """``||W||_2``: exact (LAPACK SVD) up to 2000 columns/rows, else ARPACK ``svds`` + 1 %."""
    if min(W.shape) <= 2000:
        return float(np.linalg.norm(W, 2))
    from scipy.sparse.linalg import svds

    return 1.01 * float(svds(W, k=1, return_singular_vectors=False)[0])


def rows(node, graph):
    """How many vectors of ``in`` features the parent holds: the product of its axes but the last."""
    return graph.sizes[node.inputs[0]] // node.params["weight"].shape[1]


def on_rows(x, W):
    """``x @ W`` row by row of a batch ``x`` of stalks ``(M, rows * W.shape[0])``: ``(M, rows * W.shape[1])``."""
    return (x.reshape(-1, W.shape[0]) @ W).reshape(x.shape[0], -1)


class Linear(OpRule):
    """A dense affine map of the last axis; its bias goes through the ones block.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((2, 3)), "bias": np.zeros(2)})
    >>> RULE.shape(node, [(3,)]), RULE.shape(node, [(5, 3)])
    ((2,), (5, 2))
    """

    name = "linear"
    params = ("weight", "bias")
    has_bias = True

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        W = node.params["weight"]
        if W.ndim != 2 or node.params["bias"].shape != (W.shape[0],):
            raise ValueError(f"node {node.name!r} (linear): weight must be 2-D (out, in) and bias (out,), got "
                             f"{W.shape} and {node.params['bias'].shape}")
        if parent[-1] != W.shape[1]:
            raise ValueError(f"node {node.name!r} (linear) maps the last axis of {W.shape[1]} features, got shape "
                             f"{parent}")
        return parent[:-1] + (W.shape[0],)

    def forward(self, node, graph):
        W, b = node.params["weight"], node.params["bias"]
        if rows(node, graph) == 1:
            def step(inputs, out, pattern, frozen):
                np.matmul(inputs[0], W.T, out=out)
                out += b
            return step

        def step_rows(inputs, out, pattern, frozen):
            x = inputs[0].reshape(-1, W.shape[1])
            contiguous = out.flags.c_contiguous         # then the product is written in place (a block's rows)
            z = out.reshape(-1, W.shape[0]) if contiguous else np.empty((x.shape[0], W.shape[0]))
            np.matmul(x, W.T, out=z)
            z += b
            if not contiguous:
                out[...] = z.reshape(out.shape)
        return step_rows

    def blocks(self, node, graph, pattern=None):
        n = rows(node, graph)
        W = node.params["weight"]
        return [W if n == 1 else sp.kron(sp.identity(n, format="csr"), sp.csr_matrix(W), format="csr")]

    def maps(self, node, graph):
        W = node.params["weight"]
        if rows(node, graph) == 1:
            return (lambda i, x, p: x @ W.T), (lambda i, y, p: y @ W)
        return (lambda i, x, p: on_rows(x, W.T)), (lambda i, y, p: on_rows(y, W))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        n, b = rows(node, graph), node.params["bias"]
        return b if n == 1 else np.tile(b, n)

    def norm_bound(self, node, graph):
        return spectral_norm(node.params["weight"])

    def velocity(self, node, graph):
        n_out, n_in = node.params["weight"].shape

        def velocity(x, e):
            e, x = e.reshape(-1, n_out), x.reshape(-1, n_in)
            return {"weight": e.T @ x, "bias": e.sum(axis=0)}
        return velocity

    def work(self, node, graph):
        return node.params["weight"].size * rows(node, graph)

    def nnz(self, node, graph):
        n_in = graph.sizes[node.inputs[0]]
        width = node.params["weight"].shape[1]
        return graph.sizes[node.name] * width + graph.sizes[node.name], n_in * width


RULE = Linear()
