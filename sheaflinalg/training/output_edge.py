"""The loss edge of a graph network in training: its pull on the output node, and its discord.

The output vertex ``yhat`` is pinned to the targets ``Y``; the loss edge pulls
the output node ``z`` with ``-d(loss edge)/dz``: ``J_phi^T (Y - phi(z))`` for
the mean squared error (the edge ``1/2 ||Y - phi(z)||^2``), ``Y - phi(z)`` for
cross-entropy (sigmoid or softmax output), as the chain's joint dynamics do.
Gradient descent takes the same pull scaled to the reported mean loss
(:func:`loss_gradient_scale`).  The other losses of the chain (l1, p-norm,
Huber) are not offered on graph networks (:data:`GRAPH_LOSSES`).
"""

import numpy as np

from ..network.errors import GraphNetworkError
from ..sheaf.matrix_free.residuals import output_adjoint, output_residual

#: The losses graph networks train with.
GRAPH_LOSSES = ("mse", "cross_entropy")


def check_graph_loss(loss):
    """Refuse a loss graph networks do not train with (GraphNetworkError naming the ones they do)."""
    if loss not in GRAPH_LOSSES:
        raise GraphNetworkError(f"graph networks train with the losses {', '.join(GRAPH_LOSSES)}, got {loss!r}; "
                                f"the l1, p-norm and Huber losses are offered for chains of Linear/ReLU layers")


def loss_pull(output, loss, z, Y):
    """``(pull, e_y)``: ``-d(loss edge)/dz`` on the output node's value ``z`` and the edge residual ``Y - phi(z)``.

    Examples
    --------
    >>> import numpy as np
    >>> pull, e_y = loss_pull("identity", "mse", np.array([[1.0, 2.0]]), np.array([[0.0, 2.0]]))
    >>> pull.tolist(), e_y.tolist()
    ([[-1.0, 0.0]], [[-1.0, 0.0]])
    """
    e_y = output_residual(output, z, Y)
    if loss == "cross_entropy":
        return e_y.copy(), e_y
    return output_adjoint(output, z, e_y), e_y


def loss_gradient_scale(loss, n_samples, n_outputs):
    """The factor that turns :func:`loss_pull` into minus the gradient of the reported mean loss."""
    return 1.0 / n_samples if loss == "cross_entropy" else 2.0 / (n_samples * n_outputs)


def edge_discord(e_y):
    """Per-sample discord ``1/2 ||e_y||^2`` of the loss edge (rows are samples)."""
    return 0.5 * np.einsum("ij,ij->i", e_y, e_y)
