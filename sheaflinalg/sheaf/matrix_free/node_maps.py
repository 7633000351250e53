"""The restriction maps of a graph network's nodes, geometry prepared once, the pattern given per product.

Every node ``v`` has one linear map ``F_(u->v)`` from each parent ``u``, applied
matrix-free as its op's rule writes it (:meth:`~sheaflinalg.network.ops.OpRule.maps`).
The pattern-dependent maps (masks, selections) take that
node's pattern rows (masks, argmax positions) as an argument, so that one
:class:`NodeMaps` serves a frozen pattern (spectra, completion) as well as the
pattern read off a moving state at every step (heat, training).
Values are ``(n_samples, stalk size)`` arrays, stalks flattened in C order.
"""


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
        self._pairs = {node.name: node.rule.maps(node, graph) for node in graph.nodes}

    def prepare(self, name, pattern):
        """Node ``name``'s pattern rows in the form its map uses, for many products under one frozen pattern.

        A rectifier's mask becomes its float diagonal (computed once instead of at every product; the
        products are the same bit for bit); other patterns are returned as they are (its rule's
        :meth:`~sheaflinalg.network.ops.OpRule.prepare`).
        """
        node = self.graph.node(name)
        return node.rule.prepare(node, pattern)

    def forward(self, name, i, x, pattern=None):
        """``F_(u->v) x`` for the ``i``-th parent ``u`` of node ``name`` (``pattern``: that node's rows)."""
        return self._pairs[name][0](i, x, pattern)

    def transpose(self, name, i, y, pattern=None):
        """``F_(u->v)^T y`` for the ``i``-th parent ``u`` of node ``name``."""
        return self._pairs[name][1](i, y, pattern)
