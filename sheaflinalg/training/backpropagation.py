"""Gradient descent on a graph network: backpropagation as backward substitution in the sheaf.

The exact gradient of the reported mean loss is the parameter velocity of
:mod:`.velocity` with backpropagation's adjoints in place of the edge
residuals: at the forward state (pattern read on the way), the adjoints are
``lambda = delta_Omega^{-T} r`` (:meth:`GraphCoboundary.solve_transpose`,
backward substitution in reverse topological order), ``r`` the loss's pull on
the output node scaled to the mean loss and zero elsewhere; then
``-grad = velocity(lambda)``.
"""

import numpy as np

from .._common.memory import FLOAT, check_batch
from ..network.errors import GraphNetworkError
from ..network.graph.forward import evaluate
from ..sheaf.matrix_free.coboundary import GraphCoboundary
from .output_edge import check_graph_loss, loss_gradient_scale, loss_pull
from .velocity import GraphParameters, ParameterVelocity

#: Batch-sized arrays per node value in a descent step: the forward values, the adjoints and the
#: substitution's buffers (an estimate for the memory check).
DESCENT_COPIES = 5


def descent_direction(graph, X, Y, loss, velocity=None, params=None, out=None):
    """``-grad theta`` of the mean loss of ``graph`` on ``(X, Y)``, flat in the order of ``params``.

    Parameters
    ----------
    graph : Graph
    X, Y : ndarray
        Inputs ``(M, n_inputs)`` and targets ``(M, n_out)``, checked by the caller.
    loss : {"mse", "cross_entropy"}
    velocity : ParameterVelocity, optional
        The graph's, when the caller keeps one (its geometry is reused).
    params : GraphParameters
        The flat order of the result (a graph with the same nodes).
    out : ndarray, optional
        Receives the result.

    Raises
    ------
    NetworkOverflowError
        The forward pass is not finite.
    """
    velocity = ParameterVelocity(graph) if velocity is None else velocity
    state = evaluate(graph, X, threads=1)
    z = state.values[graph.output_node]
    pull, _ = loss_pull(graph.output, loss, z, Y)
    pull *= loss_gradient_scale(loss, *z.shape)
    op = GraphCoboundary(graph, state.pattern)
    r = np.zeros((X.shape[0], op.layout.n_free))
    r[:, op.layout.free(graph.output_node)] = pull
    adjoint = op.solve_transpose(r)
    edges = {b.name: adjoint[:, b.slice] for b in op.layout.free_blocks}
    return velocity.flat(params, X, state.values, edges, out=out)


class GraphDescent:
    """``steps(n)``: ``n`` full-batch gradient steps ``theta += lr * descent_direction`` in place."""

    def __init__(self, params, theta, X, Y, loss, lr):
        self.params, self.theta, self.X, self.Y, self.loss, self.lr = params, theta, X, Y, loss, lr
        self.velocity = None
        self.direction = np.empty_like(theta)

    def __call__(self, n):
        """Returns the steps done (fewer when the parameters or the forward pass stop being finite)."""
        for k in range(n):
            graph = self.params.graph(self.theta)
            if self.velocity is None:
                self.velocity = ParameterVelocity(graph)
            try:
                descent_direction(graph, self.X, self.Y, self.loss, self.velocity, self.params, self.direction)
            except FloatingPointError:          # NetworkOverflowError: the forward pass overflows
                return k
            with np.errstate(over="ignore", invalid="ignore"):
                self.theta += self.lr * self.direction
                if not np.isfinite(np.sum(self.theta)):
                    return k
        return n


def graph_descent(prob, theta, reg, lr):
    """``(params, steps)`` of :func:`~sheaflinalg.sgd` on a graph network; refuses what it does not take."""
    check_graph_loss(prob.loss)
    if reg.mu > 0:
        raise GraphNetworkError("weight regularisation (reg.mu) is offered for chains of Linear/ReLU layers only; "
                                "train a graph network with reg=None")
    check_batch(prob.X.shape[0], DESCENT_COPIES * FLOAT * sum(prob.net.graph.sizes.values()),
                "gradient descent on a graph network")
    params = GraphParameters(prob.net.graph)
    return params, GraphDescent(params, theta, prob.X, prob.Y, prob.loss, lr)
