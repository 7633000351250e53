"""A graph network's sheaf at a state: edge residuals with the pattern read off the state, and the force.

At a state ``w`` (every node's value, the input ``X`` at the boundary) node
``v``'s defining edge has the residual
``e_v = w_v - sum over parents u of F_(u->v)(P) w_u - b_v``, where the
pattern ``P`` of the pattern-dependent nodes is read off their parents' values
in ``w`` (``z >= 0`` active, the first maximum of each window), as the
nonlinear heat equation and the joint dynamics do at every step.  The force on
the free node values is ``-(delta_P^T e)``: this is ``-grad`` of the energy
``1/2 ||e||^2`` wherever the pattern does not change.  The output edge
``e_y = yhat - phi(z_out)`` and its adjoint force are separate
(:func:`output_residual`, :func:`output_adjoint`): callers pin, drop or
replace it (training's loss).
"""

from dataclasses import dataclass

import numpy as np

from ...network import activations
from ...network.graph.forward import node_steps
from ...network.graph.nodes import INPUT
from .node_maps import NodeMaps


@dataclass
class StateResiduals:
    """Edge residuals of every node at a state, and the pattern read off that state.

    Attributes
    ----------
    edges : dict
        ``{node: (n_samples, size) array}``: ``e_v = w_v - prediction of v from its parents``.
    pattern : dict
        ``{node: rows}`` of every pattern-dependent node (bool masks, int64 argmax positions; a smooth
        node's linearisation point, or its :class:`~sheaflinalg.network.ops.tangent.Linearisation` there).
    """

    edges: dict
    pattern: dict


class GraphSheaf:
    """The sheaf of a graph network at moving states: residuals, forces, energies.

    Parameters
    ----------
    graph : Graph

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[1.0, -1.0]]), "bias": np.ones(1)})
    >>> sheaf = GraphSheaf(sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])]).graph)
    >>> X = np.array([[2.0, 0.0]])
    >>> res = sheaf.residuals(X, {"fc": np.array([[3.0]]), "r": np.array([[1.0]])})
    >>> res.edges["r"], sheaf.force(res)["fc"]
    (array([[-2.]]), array([[-2.]]))
    """

    def __init__(self, graph):
        self.graph = graph
        self.maps = NodeMaps(graph)
        self._steps = None      # the forward steps, made at the first residuals (a force alone needs none)
        self._pattern_dtype = {name: graph.node(name).rule.pattern.dtype for name in graph.pattern_nodes}

    def residuals(self, X, values):
        """:class:`StateResiduals` of the state ``values`` (``{node: (M, size)}``) with input ``X`` ``(M, n_in)``."""
        edges, pattern = {}, {}
        self._steps = node_steps(self.graph) if self._steps is None else self._steps
        for node, step in zip(self.graph.nodes, self._steps):
            # the compiled steps take C-contiguous rows (no copy when they already are)
            inputs = [np.ascontiguousarray(X if p == INPUT else values[p]) for p in node.inputs]
            w = values[node.name]
            prediction = np.empty(w.shape)
            rows = None
            if node.name in self._pattern_dtype:
                rows = pattern[node.name] = np.empty((w.shape[0], self.graph.pattern_size(node.name)),
                                                     dtype=self._pattern_dtype[node.name])
            step(inputs, prediction, rows, False)
            np.subtract(w, prediction, out=prediction)
            edges[node.name] = prediction
        return StateResiduals(edges, pattern)

    def force(self, residuals):
        """``{node: -(delta_P^T e)_v}``: minus the energy's gradient on every node's value (output edge excluded)."""
        edges, pattern = residuals.edges, residuals.pattern
        force = {name: -e for name, e in edges.items()}
        for node in self.graph.nodes:
            rows = self.maps.prepare(node.name, pattern.get(node.name))   # once for all parents (a tangent's)
            for i, parent in enumerate(node.inputs):
                if parent != INPUT:
                    force[parent] += self.maps.transpose(node.name, i, edges[node.name], rows)
        return force

    @staticmethod
    def energy(residuals):
        """Per-sample energy ``1/2 sum_v ||e_v||^2`` (output edge excluded), shape ``(M,)``."""
        return 0.5 * sum(np.einsum("ij,ij->i", e, e) for e in residuals.edges.values())


def output_residual(output, z, yhat):
    """The output edge's residual ``yhat - phi(z)`` (rows are samples)."""
    return yhat - activations.apply(output, z)


def output_adjoint(output, z, e_y):
    """``J_phi(z)^T e_y`` row by row: the output edge's pull on ``z_out`` (rows are samples)."""
    if output == "identity":
        return e_y.copy()
    y = activations.apply(output, z)
    if output == "sigmoid":
        return y * (1.0 - y) * e_y
    if output == "tanh":
        return (1.0 - y * y) * e_y
    return y * e_y - y * np.sum(y * e_y, axis=1, keepdims=True)      # softmax: J is symmetric
