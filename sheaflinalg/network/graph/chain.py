"""The chain (an MLP) as a graph, and back: ``z1 = linear(x), a1 = relu(z1), ..., z(k+1) = linear(ak)``."""

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


def chain_graph(weights, biases, output, names=None):
    """The :class:`Graph` of the chain with these layers, its nodes named ``names`` (default :func:`chain_names`).

    Examples
    --------
    >>> import numpy as np
    >>> g = chain_graph([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)], "identity")
    >>> [(n.name, n.op, n.inputs) for n in g.nodes]
    [('z1', 'linear', ('x',)), ('a1', 'relu', ('z1',)), ('z2', 'linear', ('a1',))]
    """
    names = chain_names(len(weights)) if names is None else names
    nodes, parent = [], INPUT
    for i, name in enumerate(names):
        if i % 2:
            nodes.append(Node(name, "relu", [parent]))
        else:
            nodes.append(Node(name, "linear", [parent], params={"weight": weights[i // 2], "bias": biases[i // 2]}))
        parent = name
    return Graph((weights[0].shape[1],), nodes, output)


def as_chain(graph):
    """``(weights, biases)`` if ``graph`` is a chain of linear and relu nodes on a flat input, else None."""
    if len(graph.input_shape) != 1:
        return None
    weights, biases, parent = [], [], INPUT
    for i, node in enumerate(graph.nodes):
        expected = "linear" if i % 2 == 0 else "relu"
        if node.op != expected or node.inputs != (parent,):
            return None
        if expected == "linear":
            weights.append(node.params["weight"])
            biases.append(node.params["bias"])
        parent = node.name
    if graph.nodes[-1].op != "linear":
        return None
    return weights, biases
