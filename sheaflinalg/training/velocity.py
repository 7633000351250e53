"""Parameter velocities of a graph network: ``-dE/dtheta`` of the sheaf energy at a fixed state.

At a state ``w`` with edge residuals ``e_v = w_v - F_v(theta) w_parent - b_v``
(:class:`~sheaflinalg.sheaf.matrix_free.residuals.GraphSheaf`), the energy
``E = 1/2 sum_v ||e_v||^2`` has the velocity ``-dE/dtheta`` (the structure
diffusion of the joint dynamics, and with backpropagation's adjoints in
place of ``e`` minus the loss gradient).  Each op's rule writes its own
(:meth:`~sheaflinalg.network.ops.OpRule.velocity`): for ``linear`` the weight
velocity is ``e_v^T w_u`` summed over samples and the bias's ``sum e_v``; a
convolution's shared weight correlates ``e_v`` with the parent's windows.

A batch norm is trained as the per-channel affine it folds into (its running
statistics are not parameters of the sheaf).  Parameters are a flat vector
(:class:`GraphParameters`): every node's arrays in node order, as
:meth:`Network.parameters` flattens a graph network.
"""

import numpy as np

from ..network.graph.graph import Graph
from ..network.graph.nodes import INPUT, Node


class GraphParameters:
    """The trainable arrays of a graph network as one flat vector, and graphs rebuilt from such vectors.

    Parameters
    ----------
    graph : Graph

    Attributes
    ----------
    slices : list of (node name, parameter name, slice, shape)
        Where each array sits in the flat vector (node order, then the op's parameter order).
    size : int

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> params = GraphParameters(sl.Network.from_nodes((2,), [fc, sl.Node("r", "leaky_relu", ["fc"],
    ...                                                {"negative_slope": 0.1})]).graph)
    >>> params.size, params.graph(np.arange(3.0)).node("fc").params["weight"].tolist()
    (3, [[0.0, 1.0]])
    """

    def __init__(self, graph):
        self._graph = graph
        self.slices, start = [], 0
        for node in graph.nodes:
            for key, value in node.params.items():
                self.slices.append((node.name, key, slice(start, start + value.size), value.shape))
                start += value.size
        self.size = start

    def flat(self, graph=None):
        """The parameters of ``graph`` (default: the one given at construction) as a new flat vector."""
        graph = self._graph if graph is None else graph
        theta = np.empty(self.size)
        for name, key, where, _ in self.slices:
            theta[where] = graph.node(name).params[key].ravel()
        return theta

    def arrays(self, theta):
        """``{node: {parameter: view of theta}}`` (views: writing them writes ``theta``)."""
        out = {}
        for name, key, where, shape in self.slices:
            out.setdefault(name, {})[key] = theta[where].reshape(shape)
        return out

    def graph(self, theta):
        """The graph with the parameters ``theta`` (copied into new, read-only nodes)."""
        arrays = self.arrays(theta)
        nodes = [Node(n.name, n.op, n.inputs, dict(n.attrs), arrays.get(n.name, {})) for n in self._graph.nodes]
        return Graph(self._graph.input_shape, nodes, self._graph.output)

    def norms(self, theta):
        """Frobenius norm of every trained node's parameters together (one entry per node with parameters)."""
        sums = {}
        for name, _, where, _ in self.slices:
            sums[name] = sums.get(name, 0.0) + float(np.sum(theta[where] ** 2))
        return [float(np.sqrt(v)) for v in sums.values()]


class ParameterVelocity:
    """``-dE/dtheta`` of a graph network's energy for given edge residuals, geometry prepared once.

    Parameters
    ----------
    graph : Graph
        Its shapes and geometry (not its parameter values) are used.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> graph = sl.Network.from_nodes((2,), [fc, sl.Node("r", "leaky_relu", ["fc"], {"negative_slope": 0.1})]).graph
    >>> v = ParameterVelocity(graph)(np.array([[1.0, 2.0]]), {}, {"fc": np.array([[0.5]]), "r": np.zeros((1, 1))})
    >>> v["fc"]["weight"].tolist(), v["fc"]["bias"].tolist()
    ([[0.5, 1.0]], [0.5])
    """

    def __init__(self, graph):
        self.graph = graph
        self._velocity = {node.name: node.rule.velocity(node, graph) for node in graph.nodes if node.params}

    def __call__(self, X, values, edges):
        """``{node: {parameter: velocity}}`` of every node with parameters.

        ``X`` is the input ``(M, n_inputs)``, ``values`` every node's value ``{node: (M, size)}`` (the
        parents' are read), ``edges`` the edge residuals (or adjoints) ``{node: (M, size)}``.
        """
        out = {}
        for name, velocity in self._velocity.items():
            parents = self.graph.node(name).inputs            # none: a constant node
            parent = values[parents[0]] if parents and parents[0] != INPUT else (X if parents else None)
            out[name] = velocity(parent, edges[name])
        return out

    def flat(self, params, X, values, edges, out=None):
        """The velocity as a flat vector in the order of ``params`` (a :class:`GraphParameters`)."""
        velocity = self(X, values, edges)
        out = np.empty(params.size) if out is None else out
        for name, key, where, _ in params.slices:
            out[where] = velocity[name][key].ravel()
        return out
