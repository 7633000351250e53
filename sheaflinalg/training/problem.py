"""What sheaf training and the SGD baseline share: validated data and the result object."""

from dataclasses import dataclass

from .._common.validation import as_samples
from ..network.model import Network, check_network
from .history import History
from .losses import check_targets, resolve_loss


@dataclass
class TrainResult:
    """Result of :func:`train` / :func:`sgd`; unpacks as ``network, history = result``.

    Attributes
    ----------
    network : Network
        The trained network (the weights of the last finite epoch if the run diverged).
    history : History
    state : ndarray or None
        Final free cochain, ``(n_samples, n_free)`` in ``layout``'s order (None for SGD).
    layout : Layout or None
    path : str
        Which engine ran: ``"chain"`` (the fused chain kernels) or ``"graph"``
        (:func:`~sheaflinalg.network.paths.engine`).
    """

    network: Network
    history: History
    state: object = None
    layout: object = None
    path: str = None

    def __iter__(self):
        return iter((self.network, self.history))


class Problem:
    """Validated inputs shared by :func:`train` and :func:`sgd`: network, data, loss.

    Attributes
    ----------
    net : Network
    X, Y : ndarray
        Training inputs ``(n_samples, n_inputs)`` (a graph network's ``(n_samples, *input_shape)``
        flattened) and targets ``(n_samples, n_out)``.
    X_test, Y_test : ndarray or None
    loss : str
    loss_param : float
    """

    def __init__(self, net, X, Y, X_test, Y_test, loss, loss_param):
        check_network(net, graphs=True)
        self.net = net
        self.loss, self.loss_param = resolve_loss(loss, loss_param, net.output)
        n0, n_out, shape = net.n_inputs, net.n_outputs, net.input_shape
        self.X, _ = as_samples(X, n0, "X", input_shape=shape)
        self.Y = check_targets(Y, self.X.shape[0], n_out, net.output, self.loss, "Y")
        if (X_test is None) != (Y_test is None):
            raise ValueError("give both X_test and Y_test, or neither")
        if X_test is not None:
            self.X_test, _ = as_samples(X_test, n0, "X_test", input_shape=shape)
            self.Y_test = check_targets(Y_test, self.X_test.shape[0], n_out, net.output, self.loss, "Y_test")
        else:
            self.X_test = self.Y_test = None
