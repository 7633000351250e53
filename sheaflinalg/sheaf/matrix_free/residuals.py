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

Under ``skip_encoding="edges"`` (:mod:`sheaflinalg.sheaf.skip_edges.encoding`) an ``add`` or ``concat``
node ``v`` has one edge per parent instead, ``e_(v<u_i) = (w_v - F_i w_(u_i))[R_i]`` (the bias on the first
parent's), keyed by the edge's name without ``e_``; its force is ``-sum_i`` of them, each scattered to its rows.
"""

from dataclasses import dataclass

import numpy as np

from ...network import activations
from ...network.graph.forward import node_steps
from ...network.graph.nodes import INPUT
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, fed_rows, is_split, split_edge_names
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
    skip_encoding : {"sum", "edges"}
        ``"edges"``: one edge per parent of an ``add`` or ``concat`` node (see the module).

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

    def __init__(self, graph, skip_encoding=DEFAULT_SKIP_ENCODING):
        self.graph = graph
        self.maps = NodeMaps(graph)
        # {node: [(edge key, rows its parent feeds)]} of the nodes split under "edges"
        self._split = {node.name: [(name[2:], fed_rows(F)) for name, F in
                                   zip(split_edge_names(node), node.rule.blocks(node, graph))]
                       for node in graph.nodes if is_split(node, skip_encoding)}
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
            if node.name in self._split:
                edges.update(self._split_edges(node, inputs, w, prediction))
            else:
                edges[node.name] = prediction
        return StateResiduals(edges, pattern)

    def _split_edges(self, node, inputs, w, summed):
        """``{edge key: residual}`` of a split node from its hyperedge's residual ``summed``: the first parent's
        edge (it carries the bias) is ``summed + sum over k > 0 of F_k w_(u_k)``, the others ``w_v - F_i w_(u_i)``."""
        mapped = [self.maps.forward(node.name, i, x) for i, x in enumerate(inputs)]
        return {key: (summed + sum(mapped[1:]) if i == 0 else w - mapped[i])[:, rows]
                for i, (key, rows) in enumerate(self._split[node.name])}

    def _scattered(self, node, edges):
        """A split node's edges, each scattered to the node's rows (its parents' order)."""
        parts = []
        for key, rows in self._split[node.name]:
            part = np.zeros((edges[key].shape[0], self.graph.sizes[node.name]))
            part[:, rows] = edges[key]
            parts.append(part)
        return parts

    def force(self, residuals):
        """``{node: -(delta_P^T e)_v}``: minus the energy's gradient on every node's value (output edge excluded)."""
        edges, pattern = residuals.edges, residuals.pattern
        parts = {name: self._scattered(self.graph.node(name), edges) for name in self._split}
        force = {node.name: -(sum(parts[node.name]) if node.name in parts else edges[node.name])
                 for node in self.graph.nodes}
        for node in self.graph.nodes:
            rows = self.maps.prepare(node.name, pattern.get(node.name))   # once for all parents (a tangent's)
            for i, parent in enumerate(node.inputs):
                if parent != INPUT:
                    e = parts[node.name][i] if node.name in parts else edges[node.name]
                    force[parent] += self.maps.transpose(node.name, i, e, rows)
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
