"""A feedforward computational graph: the input shape, the nodes in topological order, the output."""

import math
import numbers

from .. import activations
from .nodes import INPUT, Node, output_shape


class Graph:
    """Nodes of a feedforward network in topological order, with every node's per-sample shape.

    Parameters
    ----------
    input_shape : tuple of int
        Per-sample shape of the input ``x`` (without the batch axis), e.g. ``(1, 40)`` or ``(3, 32, 32)``.
    nodes : sequence of Node
        In topological order: every parent is ``"x"`` or a node defined earlier.
        The last node is the network's output ``z_out``.
    output : {"identity", "sigmoid", "tanh", "softmax"}
        Output activation phi applied to the last node (its output vertex is ``yhat``).

    Attributes
    ----------
    nodes : tuple of Node
    shapes : dict
        ``{name: per-sample shape}``, the input ``"x"`` included.
    sizes : dict
        ``{name: stalk size}`` (the product of the shape).
    output_node : str
        Name of the last node.

    Examples
    --------
    >>> import numpy as np
    >>> g = Graph((1, 8), [Node("conv", "conv", ["x"], {"stride": 2, "padding": 1, "dilation": 1, "groups": 1},
    ...                         {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)}),
    ...                    Node("act", "relu", ["conv"])])
    >>> g.shapes["act"], g.sizes["act"]
    ((2, 4), 8)
    """

    def __init__(self, input_shape, nodes, output="identity"):
        activations.check_output(output)
        if isinstance(input_shape, numbers.Integral):
            input_shape = (input_shape,)
        if not isinstance(input_shape, (tuple, list)) or not input_shape or not all(
                isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1 for n in input_shape):
            raise ValueError(f"input_shape must be a tuple of positive ints (per sample, no batch axis), "
                             f"got {input_shape!r}")
        input_shape = tuple(int(n) for n in input_shape)
        nodes = tuple(nodes)
        if not nodes:
            raise ValueError("a graph needs at least one node")
        shapes = {INPUT: input_shape}
        for node in nodes:
            if not isinstance(node, Node):
                raise TypeError(f"graph nodes must be sheaflinalg Node objects, got {type(node).__name__}")
            if node.name in shapes:
                raise ValueError(f"node name {node.name!r} is used twice")
            missing = [p for p in node.inputs if p not in shapes]
            if missing:
                raise ValueError(f"node {node.name!r} ({node.op}) reads {missing}, which is not the input 'x' or a "
                                 "node defined before it (nodes must be in topological order)")
            shapes[node.name] = output_shape(node, [shapes[p] for p in node.inputs])
        self.input_shape = input_shape
        self.nodes = nodes
        self.output = output
        self.output_node = nodes[-1].name
        self.shapes = shapes
        self.sizes = {name: math.prod(shape) for name, shape in shapes.items()}
        self._by_name = {node.name: node for node in nodes}
        if output == "softmax" and self.sizes[self.output_node] < 2:
            raise ValueError("softmax output needs at least 2 output features")

    def __reduce__(self):
        return (Graph, (self.input_shape, self.nodes, self.output))

    def __repr__(self):
        return (f"Graph(input_shape={self.input_shape}, nodes={len(self.nodes)}, output_node={self.output_node!r}, "
                f"output={self.output!r})")

    def node(self, name):
        """The :class:`Node` called ``name`` (KeyError listing the names if there is none)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; nodes: {', '.join(self._by_name)}") from None

    @property
    def n_inputs(self):
        """Input features per sample (``prod(input_shape)``)."""
        return self.sizes[INPUT]

    @property
    def n_outputs(self):
        """Output features per sample."""
        return self.sizes[self.output_node]

    @property
    def n_parameters(self):
        """Number of parameters (weights, biases, batch-norm scales and shifts)."""
        return sum(p.size for node in self.nodes for p in node.params.values())

    @property
    def pattern_nodes(self):
        """Names of the pattern-dependent nodes (relu, leaky_relu, maxpool), in order."""
        return [node.name for node in self.nodes if node.rule.pattern_dependent]

    def pattern_size(self, name):
        """Entries per sample of pattern node ``name``'s pattern rows (its rule's
        :meth:`~sheaflinalg.network.ops.OpRule.pattern_size`)."""
        node = self.node(name)
        return node.rule.pattern_size(node, self)

    @property
    def smooth_nodes(self):
        """Names of the smooth nodes (their sheaf at a state is their tangent there), in order."""
        return [node.name for node in self.nodes if node.rule.smooth]

    def children(self, name):
        """Names of the nodes that read ``name``."""
        return [node.name for node in self.nodes if name in node.inputs]
