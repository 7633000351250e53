"""``upsample``: upsampling by an integer factor per spatial axis, nearest-neighbour or (bi)linear
(``nn.Upsample``, ``F.interpolate`` with mode ``"nearest"``, ``"linear"`` or ``"bilinear"``).

Either mode is separable: the map is ``I_C (x) A_1 (x) A_2`` (channels, then each spatial axis), every
factor ``A_i`` a sparse ``(n_i * scale_i, n_i)`` matrix with at most two entries per row, built once from
PyTorch's source coordinates (:func:`factor`).  Products go axis by axis through the factors.
"""

import numbers
from types import MappingProxyType

import numpy as np
import scipy.sparse as sp

from .rule import OpRule, csr

MODES = ("nearest", "linear")


def check_scale(node, parent):
    """``node.attrs['scale']`` as a tuple of ints >= 1, one per spatial axis of the channels-first ``parent``."""
    scale, n = node.attrs["scale"], len(parent) - 1
    scale = (scale,) * max(n, 1) if isinstance(scale, numbers.Integral) else tuple(scale)
    if n < 1 or len(scale) != n or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1
                                           for s in scale):
        raise ValueError(f"node {node.name!r} (upsample): scale must be {max(n, 1)} integers >= 1 (one per spatial "
                         f"axis of the channels-first shape {parent}), got {node.attrs['scale']!r}")
    return tuple(int(s) for s in scale)


def check_mode(node):
    """``(mode, align_corners)`` of the node: ``"nearest"`` (``align_corners`` False) or ``"linear"``."""
    mode, align = node.attrs["mode"], node.attrs["align_corners"]
    if mode not in MODES or not isinstance(align, (bool, np.bool_)) or (align and mode == "nearest"):
        raise ValueError(f"node {node.name!r} (upsample): mode must be one of {list(MODES)} and align_corners a "
                         f"bool (True only with mode 'linear'), got mode={mode!r}, align_corners={align!r}")
    return mode, bool(align)


def source_coordinates(n, scale, align_corners):
    """PyTorch's source coordinate in ``[0, n - 1]`` of every output position of a linear upsampling of a
    length-``n`` axis by ``scale``: ``q (n - 1) / (m - 1)`` with aligned corners, else the pixel centre
    ``(q + 1/2) / scale - 1/2`` clamped at 0 (``m = n * scale`` outputs).

    Examples
    --------
    >>> source_coordinates(2, 2, False).tolist(), source_coordinates(2, 2, True).tolist()
    ([0.0, 0.25, 0.75, 1.25], [0.0, 0.3333333333333333, 0.6666666666666666, 1.0])
    """
    q = np.arange(n * scale, dtype=np.float64)
    if align_corners:
        return q * ((n - 1) / (n * scale - 1)) if n * scale > 1 else np.zeros(1)
    return np.maximum((q + 0.5) / scale - 0.5, 0.0)


def factor(n, scale, mode, align_corners):
    """The ``(n * scale, n)`` CSR factor of one axis: nearest copies entry ``q // scale``; linear weighs
    ``i0 = floor(src)`` by ``1 - (src - i0)`` and ``min(i0 + 1, n - 1)`` by ``src - i0``.

    Examples
    --------
    >>> factor(2, 2, "linear", False).toarray().tolist()
    [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    """
    m = n * scale
    if mode == "nearest":
        return csr(np.arange(m), np.arange(m) // scale, np.ones(m), (m, n))
    src = source_coordinates(n, scale, align_corners)
    i0 = np.minimum(src.astype(np.int64), n - 1)
    w1 = src - i0
    rows = np.arange(m)
    out = csr(np.concatenate([rows, rows]), np.concatenate([i0, np.minimum(i0 + 1, n - 1)]),
              np.concatenate([1.0 - w1, w1]), (m, n))
    out.eliminate_zeros()
    return out


def factors(node, graph):
    """The factor of every spatial axis of the node's parent."""
    parent = graph.shapes[node.inputs[0]]
    mode, align = check_mode(node)
    return [factor(n, s, mode, align) for n, s in zip(parent[1:], check_scale(node, parent))]


def along_axes(x, shape, mats):
    """``(I_C (x) mats[0] (x) mats[1] ...) x`` for the rows of ``x`` (``(samples, prod(shape))``, ``shape`` the
    channels-first input shape): one sparse product per spatial axis."""
    y = x.reshape((x.shape[0],) + tuple(shape))
    for axis, A in enumerate(mats, start=2):
        moved = np.moveaxis(y, axis, -1)
        product = (A @ moved.reshape(-1, moved.shape[-1]).T).T           # (rows, A.shape[0])
        y = np.moveaxis(product.reshape(moved.shape[:-1] + (A.shape[0],)), -1, axis)
    return np.ascontiguousarray(y).reshape(x.shape[0], -1)


class Upsample(OpRule):
    """Output position ``(c, q)`` reads the parent's ``(c, q // scale)`` (nearest) or the two (four in 2-D)
    entries around PyTorch's source coordinate of ``q`` (linear, ``align_corners`` or half-pixel centres).

    Every factor has nonnegative entries and rows summing to 1, so ``sqrt(||F||_1 ||F||_inf)``, the product
    of the factors' ``sqrt(max column sum)``, bounds ``||F||_2``; for nearest it is ``sqrt(prod(scale))``,
    the exact norm (``F^T F = prod(scale) I``).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("u", "upsample", ["x"], {"scale": (2, 3), "mode": "linear"}), [(4, 5, 6)])
    (4, 10, 18)
    """

    name = "upsample"
    attrs = ("scale", "mode", "align_corners")
    optional = MappingProxyType({"mode": "nearest", "align_corners": False})

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        check_mode(node)
        return (parent[0],) + tuple(n * s for n, s in zip(parent[1:], check_scale(node, parent)))

    def forward(self, node, graph):
        shape, mats = graph.shapes[node.inputs[0]], factors(node, graph)

        def step(inputs, out, pattern, frozen):
            out[...] = along_axes(inputs[0], shape, mats)
        return step

    def blocks(self, node, graph, pattern=None):
        channels = graph.shapes[node.inputs[0]][0]
        F = sp.identity(channels, format="csr")
        for A in factors(node, graph):
            F = sp.kron(F, A, format="csr")
        F.sort_indices()
        return [F]

    def maps(self, node, graph):
        shape, mats = graph.shapes[node.inputs[0]], factors(node, graph)
        out_shape, transposed = graph.shapes[node.name], [A.T.tocsr() for A in mats]
        return ((lambda i, x, p: along_axes(x, shape, mats)),
                (lambda i, y, p: along_axes(y, out_shape, transposed)))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        # rows sum to 1 (||A||_inf = 1): sqrt(||A||_1 ||A||_inf) is sqrt of the largest column sum
        return float(np.prod([np.sqrt(np.asarray(A.sum(axis=0)).max()) for A in factors(node, graph)]))

    def velocity(self, node, graph):
        return None

    def work(self, node, graph):
        return graph.sizes[node.inputs[0]] + self.nnz(node, graph)[0]

    def nnz(self, node, graph):
        channels = graph.shapes[node.inputs[0]][0]
        mats = factors(node, graph)
        return (channels * int(np.prod([A.nnz for A in mats])),
                channels * int(np.prod([(A.T @ A).nnz for A in mats])))


RULE = Upsample()
