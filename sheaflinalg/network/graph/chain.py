"""The chain (an MLP) as a graph, and back: ``z1 = linear(x), a1 = relu(z1), ..., z(k+1) = linear(ak)``."""

from ..ops.linear import RULE as LINEAR
from ..ops.relu import RULE as RELU
from .graph import Graph
from .nodes import INPUT, Node


def chain_names(n_layers):
    """The paper's node names of a chain of ``n_layers`` linear layers: ``z1, a1, ..., z(n_layers)``.

    Examples
    --------
    >>> chain_names(2)
    ('z1', 'a1', 'z2')
    """
    return tuple(name for l in range(1, n_layers + 1) for name in (f"z{l}", f"a{l}"))[:-1]


def renamed(graph, names):
    """``graph`` with its nodes called ``names`` (in topological order; the parents follow).

    Examples
    --------
    >>> import numpy as np
    >>> g = chain_graph([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)], "identity")
    >>> [(n.name, n.inputs) for n in renamed(g, ["fc", "act", "out"]).nodes]
    [('fc', ('x',)), ('act', ('fc',)), ('out', ('act',))]
    """
    new = dict(zip([node.name for node in graph.nodes], names))
    nodes = [Node(new[n.name], n.op, [new.get(p, p) for p in n.inputs], dict(n.attrs), dict(n.params))
             for n in graph.nodes]
    return Graph(graph.input_shape, nodes, graph.output)


def chain_graph(weights, biases, output):
    """The :class:`Graph` of the chain with these layers, its nodes named as the chain's blocks (``z1``, ``a1``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> g = chain_graph([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)], "identity")
    >>> [(n.name, n.op, n.inputs) for n in g.nodes]
    [('z1', 'linear', ('x',)), ('a1', 'relu', ('z1',)), ('z2', 'linear', ('a1',))]
    """
    nodes, parent = [], INPUT
    for l, (W, b) in enumerate(zip(weights, biases), start=1):
        nodes.append(Node(f"z{l}", LINEAR.name, [parent], params={"weight": W, "bias": b}))
        parent = f"z{l}"
        if l < len(weights):
            nodes.append(Node(f"a{l}", RELU.name, [parent]))
            parent = f"a{l}"
    return Graph((weights[0].shape[1],), nodes, output)


def as_chain(graph):
    """``(weights, biases)`` if ``graph`` is a chain of linear and relu nodes on a flat input, else None."""
    if len(graph.input_shape) != 1:
        return None
    weights, biases, parent = [], [], INPUT
    for i, node in enumerate(graph.nodes):
        expected = LINEAR if i % 2 == 0 else RELU
        if node.rule is not expected or node.inputs != (parent,):
            return None
        if expected is LINEAR:
            weights.append(node.params["weight"])
            biases.append(node.params["bias"])
        parent = node.name
    if graph.nodes[-1].rule is not LINEAR:
        return None
    return weights, biases
