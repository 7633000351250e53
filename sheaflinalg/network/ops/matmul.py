"""``matmul``: ``alpha A @ B`` of two parents, matrices over their last two axes (attention's ``Q K^T`` and
``P V``).

``A`` has the per-sample shape ``(..., n, k)`` and ``B`` ``(..., k, m)`` with the same leading (head) axes;
the output is ``(..., n, m)``, one product per leading index, scaled by the attribute ``alpha`` (1, or
``1 / sqrt(d)`` for attention's scores: the scale and the product are one node).  At the point ``(A, B)``
the tangent is ``J_A X = alpha X B`` and ``J_B Y = alpha A Y`` per leading index (CSR blocks: every
output entry reads ``k`` entries of each factor), and the constant ``f(p) - J_A A - J_B B = -alpha A B``.

``J_A`` is ``I_n kron alpha B^T`` per leading index, so ``||J_A||_2 = |alpha| max ||B||_2`` and
``||J_B||_2 = |alpha| max ||A||_2``: no bound holds for every state, :meth:`MatMul.norm_bound` is
``math.inf`` and :meth:`MatMul.norm_at` gives these norms at given points.
"""

import math
import numbers

import numpy as np

from .rule import csr
from .tangent import Linearisation, Tangent


def product_shape(node, parent_shapes):
    """The output shape ``(..., n, m)``; ValueError naming the node if the factors do not fit."""
    a, b = parent_shapes
    alpha = node.attrs["alpha"]
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise ValueError(f"node {node.name!r} (matmul): alpha must be a finite number, got {alpha!r}")
    if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
        raise ValueError(f"node {node.name!r} (matmul): its parents {list(node.inputs)} have shapes {a} and {b}; "
                         "expected (..., n, k) and (..., k, m) with the same leading axes")
    return a[:-1] + b[-1:]


class Product(Linearisation):
    """The tangent of ``alpha A @ B`` at the factors ``A``, ``B`` (``(n_samples, ..., n, k)``, ``(..., k, m)``)."""

    def __init__(self, A, B, alpha, shapes):
        self.A, self.B, self.alpha, self.shapes = A, B, alpha, shapes

    def _rows(self, i, x):
        return x.reshape((x.shape[0],) + self.shapes[i])

    def apply(self, i, x):
        out = self._rows(0, x) @ self.B if i == 0 else self.A @ self._rows(1, x)
        return self.alpha * out.reshape(x.shape[0], -1)

    def transpose(self, i, y):
        y = y.reshape((y.shape[0],) + self.shapes[2])
        out = y @ np.swapaxes(self.B, -1, -2) if i == 0 else np.swapaxes(self.A, -1, -2) @ y
        return self.alpha * out.reshape(y.shape[0], -1)

    def block(self, i, s):
        """Output entry ``(h, r, c)`` reads ``A[h, r, l]`` with the weight ``alpha B[h, l, c]`` and ``B[h, l, c]``
        with ``alpha A[h, r, l]``, for every ``l``."""
        A, B = self.A[s], self.B[s]
        lead, (n, k), m = A.shape[:-2], A.shape[-2:], B.shape[-1]
        h, r, c, l = np.meshgrid(np.arange(int(np.prod(lead))), np.arange(n), np.arange(m), np.arange(k),
                                 indexing="ij")
        A, B = A.reshape(-1, n, k), B.reshape(-1, k, m)
        rows = (h * n + r) * m + c
        if i == 0:
            cols, vals = (h * n + r) * k + l, B[h, l, c]
        else:
            cols, vals = (h * k + l) * m + c, A[h, r, l]
        return csr(rows, cols, self.alpha * vals, (rows.size // k, int(np.prod(self.shapes[i]))))


class MatMul(Tangent):
    """``x_v = alpha A @ B`` over the last two axes (see the module).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> t = sl.Node("t", "permute", ["x"], {"axes": (1, 0)})
    >>> net = sl.Network.from_nodes((2, 3), [t, sl.Node("g", "matmul", ["x", "t"], {"alpha": 1.0})])
    >>> net.forward(np.arange(6.0)[None])          # the Gram matrix of the rows
    array([[ 5., 14., 14., 50.]])
    """

    name = "matmul"
    attrs = ("alpha",)
    min_inputs = max_inputs = 2
    state_bound = True

    def shape(self, node, parent_shapes):
        return product_shape(node, parent_shapes)

    def _factors(self, node, graph, point):
        A, B = point
        a, b = (graph.shapes[p] for p in node.inputs)
        return A.reshape((A.shape[0],) + a), B.reshape((B.shape[0],) + b)

    def function(self, node, graph):
        alpha = float(node.attrs["alpha"])

        def f(inputs):
            A, B = self._factors(node, graph, inputs)
            return alpha * (A @ B).reshape(A.shape[0], -1)
        return f

    def evaluated(self, node, graph):
        f, alpha, shape = self.function(node, graph), float(node.attrs["alpha"]), graph.shapes[node.name]

        def both(inputs, out):      # the product written into the node's rows (no temporary and copy)
            if not out.flags.c_contiguous:
                out[...] = f(inputs)
                return self.linearise(node, graph, inputs)
            A, B = self._factors(node, graph, inputs)
            product = out.reshape((out.shape[0],) + shape)
            np.matmul(A, B, out=product)
            if alpha != 1.0:
                product *= alpha
            return self.linearise(node, graph, inputs)
        return both

    def linearise(self, node, graph, point):
        A, B = self._factors(node, graph, point)
        shapes = tuple(graph.shapes[p] for p in node.inputs) + (graph.shapes[node.name],)
        return Product(A, B, float(node.attrs["alpha"]), shapes)

    def norm_bound(self, node, graph):
        return math.inf

    def norm_at(self, node, graph, rows):
        A, B = self._factors(node, graph, self.split(node, graph, np.atleast_2d(rows)))
        norms = [np.linalg.norm(F.reshape((F.shape[0], -1) + F.shape[-2:]), 2, axis=(-2, -1)).max(axis=1)
                 for F in (A, B)]
        return abs(float(node.attrs["alpha"])) * np.maximum(*norms)

    def nnz(self, node, graph):
        n, k = graph.sizes[node.name], graph.shapes[node.inputs[0]][-1]
        # J_A^T J_A and J_B^T J_B: k entries of A (B) share their row i (column j); J_A^T J_B: k^2 pairs a row
        return 2 * n * k + n, k * sum(graph.sizes[p] for p in node.inputs) + 2 * n * k * k

    def work(self, node, graph):
        return 3 * graph.sizes[node.name] * graph.shapes[node.inputs[0]][-1]


RULE = MatMul()
