"""``linear``: ``x_v = W x_u + b`` on a flat parent (PyTorch's Linear, ONNX's Gemm)."""

import numpy as np

from .rule import OpRule


def spectral_norm(W):
    """``||W||_2``: exact (LAPACK SVD) up to 2000 columns/rows, else ARPACK ``svds`` + 1 %."""
    if min(W.shape) <= 2000:
        return float(np.linalg.norm(W, 2))
    from scipy.sparse.linalg import svds

    return 1.01 * float(svds(W, k=1, return_singular_vectors=False)[0])


class Linear(OpRule):
    """A dense affine map; its bias goes through the ones block.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((2, 3)), "bias": np.zeros(2)})
    >>> RULE.shape(node, [(3,)])
    (2,)
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
        if parent != (W.shape[1],):
            raise ValueError(f"node {node.name!r} (linear) takes a flat input of {W.shape[1]} features, got shape "
                             f"{parent} (flatten first)")
        return (W.shape[0],)

    def forward(self, node, graph):
        W, b = node.params["weight"], node.params["bias"]

        def step(inputs, out, pattern, frozen):
            np.matmul(inputs[0], W.T, out=out)
            out += b
        return step

    def blocks(self, node, graph, pattern=None):
        return [node.params["weight"]]

    def maps(self, node, graph):
        W = node.params["weight"]
        return (lambda i, x, p: x @ W.T), (lambda i, y, p: y @ W)

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return node.params["bias"]

    def norm_bound(self, node, graph):
        return spectral_norm(node.params["weight"])

    def velocity(self, node, graph):
        def velocity(x, e):
            return {"weight": e.T @ x, "bias": e.sum(axis=0)}
        return velocity

    def work(self, node, graph):
        return node.params["weight"].size

    def nnz(self, node, graph):
        n_in = graph.sizes[node.inputs[0]]
        return graph.sizes[node.name] * n_in + graph.sizes[node.name], n_in * n_in


RULE = Linear()
