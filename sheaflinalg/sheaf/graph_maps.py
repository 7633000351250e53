"""The restriction maps of a graph network's nodes, geometry prepared once, the pattern given per product.

Every node ``v`` has one linear map ``F_(u->v)`` from each parent ``u`` (a
dense matrix, a convolution, a pool, a batch-norm scale, a ReLU mask, a
max-pool selection, an identity, or a placement into a concatenation).  The
pattern-dependent maps (``relu``, ``leaky_relu``, ``maxpool``) take that
node's pattern rows (masks, argmax positions) as an argument, so that one
:class:`NodeMaps` serves a frozen pattern (spectra, completion) as well as the
pattern read off a moving state at every step (heat, training).
Values are ``(n_samples, stalk size)`` arrays, stalks flattened in C order.
"""

import numpy as np

from ..kernels.convolution import conv_forward, conv_transpose
from ..kernels.pooling import average_pool, average_pool_transpose, max_pool_transpose
from ..network.graph.forward import conv_geometry_of, pool_windows


def concat_positions(node, graph):
    """For each parent of a ``concat`` node, the positions of its entries in the child's stalk."""
    axis = node.attrs["axis"]
    shape = graph.shapes[node.name]
    positions = np.arange(graph.sizes[node.name]).reshape(shape)
    bounds = np.cumsum([0] + [graph.shapes[p][axis] for p in node.inputs])
    return [np.take(positions, np.arange(lo, hi), axis=axis).ravel() for lo, hi in zip(bounds[:-1], bounds[1:])]


def channel_scale(node, graph):
    """A batch-norm node's scale repeated to one entry per stalk coordinate, shape ``(1, size)``."""
    per = graph.sizes[node.name] // node.params["scale"].size
    return np.repeat(node.params["scale"], per)[None, :]


def mask_values(node, mask):
    """The diagonal of a ``relu``/``leaky_relu`` node's map for its mask rows: 1 active, the slope inactive.

    A float64 ``mask`` is taken as that diagonal already (:meth:`NodeMaps.prepare`).
    """
    if mask.dtype == np.float64:
        return mask
    slope = 0.0 if node.op == "relu" else float(node.attrs["negative_slope"])
    return np.where(mask, 1.0, slope)


def _identity(i, x, pattern):
    return x


def _maps(node, graph):
    """``(forward, transpose)`` of one node: ``f(i, x, pattern)`` for parent number ``i``."""
    op = node.op
    if op == "linear":
        W = node.params["weight"]
        return (lambda i, x, p: x @ W.T), (lambda i, y, p: y @ W)
    if op == "conv":
        W, geom = node.params["weight"], conv_geometry_of(node, graph)
        zero = np.zeros(W.shape[0])
        return (lambda i, x, p: conv_forward(x, W, zero, geom)), (lambda i, y, p: conv_transpose(y, W, geom))
    if op in ("avgpool", "adaptive_avgpool"):
        windows = pool_windows(node, graph)
        return ((lambda i, x, p: average_pool(x, *windows)),
                (lambda i, y, p: average_pool_transpose(y, *windows)))
    if op == "maxpool":
        n_parent = graph.sizes[node.inputs[0]]
        return ((lambda i, x, p: np.take_along_axis(x, p, axis=1)),
                (lambda i, y, p: max_pool_transpose(y, p, n_parent)))
    if op == "batchnorm":
        scale = channel_scale(node, graph)
        return (lambda i, x, p: x * scale), (lambda i, y, p: y * scale)
    if op in ("relu", "leaky_relu"):
        return ((lambda i, x, p: x * mask_values(node, p)), (lambda i, y, p: y * mask_values(node, p)))
    if op == "concat":
        parts, size = concat_positions(node, graph), graph.sizes[node.name]

        def place(i, x, p):
            out = np.zeros((x.shape[0], size))
            out[:, parts[i]] = x
            return out
        return place, (lambda i, y, p: y[:, parts[i]])
    return _identity, _identity          # add, reshape


class NodeMaps:
    """The linear maps ``F_(u->v)`` of every node of ``graph`` and their transposes.

    Parameters
    ----------
    graph : Graph

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[1.0, 2.0]]), "bias": np.zeros(1)})
    >>> maps = NodeMaps(sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])]).graph)
    >>> maps.forward("fc", 0, np.array([[1.0, 1.0]])), maps.transpose("r", 0, np.array([[5.0]]), np.array([[False]]))
    (array([[3.]]), array([[0.]]))
    """

    def __init__(self, graph):
        self.graph = graph
        self._pairs = {node.name: _maps(node, graph) for node in graph.nodes}

    def prepare(self, name, pattern):
        """Node ``name``'s pattern rows in the form its map uses, for many products under one frozen pattern.

        The masks of ``relu``/``leaky_relu`` become their float diagonals (computed once instead of at
        every product; the products are the same bit for bit); other patterns are returned as they are.
        """
        if pattern is not None and self.graph.node(name).op in ("relu", "leaky_relu"):
            return mask_values(self.graph.node(name), pattern)
        return pattern

    def forward(self, name, i, x, pattern=None):
        """``F_(u->v) x`` for the ``i``-th parent ``u`` of node ``name`` (``pattern``: that node's rows)."""
        return self._pairs[name][0](i, x, pattern)

    def transpose(self, name, i, y, pattern=None):
        """``F_(u->v)^T y`` for the ``i``-th parent ``u`` of node ``name``."""
        return self._pairs[name][1](i, y, pattern)
