"""Training losses: names, target checks, the reported forward-pass loss and accuracy.

The same table serves the sheaf dynamics (:func:`sheaflinalg.train`) and the
gradient-descent baseline (:func:`sheaflinalg.sgd`):

==================  =======================================  ==============================
loss                reported value (forward pass)            output-edge force
==================  =======================================  ==============================
``"mse"``           mean of ``(phi(z) - y)^2`` over entries   ``-J^T (phi(z) - y)``
``"l1"``            mean of ``|d|``                           ``-J^T sign(d)``
``"pnorm"``         mean of ``|d|^p / p``                     ``-J^T |d|^(p-2) d``
``"huber"``         mean of the Huber potential ``f_tau(d)``  ``-J^T clip(d, -tau, tau)``
``"cross_entropy"`` mean over samples of the summed (binary)   ``-(phi(z) - y)``
                    cross-entropy
==================  =======================================  ==============================

``d = phi(z) - y``; ``J`` is the Jacobian of the output activation (identity
for identity output).  Cross-entropy needs a sigmoid (binary, labels in
``[0, 1]``) or softmax (one-hot rows) output; probabilities are clipped to
``[1e-12, 1 - 1e-12]`` as in the paper's experiments.
"""

import numpy as np

from .._common.validation import as_float64, check_real

LOSSES = ("mse", "l1", "pnorm", "huber", "cross_entropy")
_ALIASES = {"squared": "mse", "l2": "mse", "ce": "cross_entropy", "bce": "cross_entropy",
            "binary_cross_entropy": "cross_entropy", "p-norm": "pnorm"}
_DEFAULT_PARAM = {"pnorm": 1.5, "huber": 1.0}
EPS = 1e-12


def resolve_loss(loss, loss_param, output):
    """Normalise ``(loss, loss_param)`` for a network with output activation ``output``.

    ``loss=None`` picks cross-entropy for sigmoid/softmax outputs and mean
    squared error otherwise.  Raises ValueError for unknown names, bad
    parameters, or cross-entropy without a sigmoid/softmax output.

    Examples
    --------
    >>> resolve_loss(None, None, "softmax")
    ('cross_entropy', 0.0)
    >>> resolve_loss("huber", None, "identity")
    ('huber', 1.0)
    """
    if loss is None:
        loss = "cross_entropy" if output in ("sigmoid", "softmax") else "mse"
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a string, one of {', '.join(LOSSES)}; got {type(loss).__name__}")
    loss = _ALIASES.get(loss.lower(), loss.lower())
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {', '.join(LOSSES)}")
    if loss == "cross_entropy" and output not in ("sigmoid", "softmax"):
        raise ValueError(f"cross_entropy needs a sigmoid or softmax output activation, "
                         f"the network has {output!r}")
    if loss in _DEFAULT_PARAM:
        param = _DEFAULT_PARAM[loss] if loss_param is None else check_real(loss_param, "loss_param")
        if loss == "pnorm" and not (np.isfinite(param) and param > 1):
            raise ValueError(f"the p-norm loss needs p > 1, got loss_param={loss_param!r}")
        if loss == "huber" and not (np.isfinite(param) and param > 0):
            raise ValueError(f"the Huber loss needs a threshold tau > 0, got loss_param={loss_param!r}")
        return loss, param
    if loss_param is not None:
        raise ValueError(f"loss {loss!r} takes no loss_param (got {loss_param!r})")
    return loss, 0.0


def check_targets(Y, n_samples, n_out, output, loss, name="Y"):
    """Validate and shape targets: returns a float64 ``(n_samples, n_out)`` array.

    A 1-D ``Y`` is one target per sample (``n_out == 1``), or integer class
    labels for a softmax output (converted to one-hot rows).
    """
    Y = as_float64(Y, name)
    if Y.ndim == 1:
        if n_out == 1:
            Y = Y[:, None]
        elif output == "softmax":
            labels = Y
            if not np.all(labels == np.round(labels)) or labels.min() < 0 or labels.max() >= n_out:
                raise ValueError(f"1-D {name} for a softmax output must hold integer class labels "
                                 f"in 0..{n_out - 1}")
            Y = np.zeros((labels.shape[0], n_out))
            Y[np.arange(labels.shape[0]), labels.astype(np.int64)] = 1.0
        else:
            raise ValueError(f"{name} is 1-D but the network has {n_out} outputs; "
                             f"expected shape ({n_samples}, {n_out})")
    if Y.ndim != 2 or Y.shape != (n_samples, n_out):
        raise ValueError(f"{name} has shape {Y.shape} but X has {n_samples} samples and the network "
                         f"{n_out} outputs; expected ({n_samples}, {n_out})")
    if loss == "cross_entropy":
        if output == "softmax":
            if not (np.all((Y == 0) | (Y == 1)) and np.all(Y.sum(axis=1) == 1)):
                raise ValueError(f"{name} must hold one-hot rows (entries 0/1, one 1 per row) for a "
                                 f"softmax output with cross-entropy")
        elif Y.min() < 0 or Y.max() > 1:
            raise ValueError(f"{name} must lie in [0, 1] (binary labels) for a sigmoid output with "
                             f"cross-entropy; got values in [{Y.min():g}, {Y.max():g}]")
    return np.ascontiguousarray(Y)


def loss_value(P, Y, loss, loss_param, output):
    """The reported loss of predictions ``P = phi(z)`` against targets ``Y`` (rows are samples).

    Examples
    --------
    >>> import numpy as np
    >>> loss_value(np.array([[1.0], [3.0]]), np.zeros((2, 1)), "mse", 0.0, "identity")
    5.0
    """
    if loss == "cross_entropy":
        P = np.clip(P, EPS, 1.0 - EPS)
        if output == "sigmoid":
            return float(-np.mean(np.sum(Y * np.log(P) + (1.0 - Y) * np.log(1.0 - P), axis=1)))
        return float(-np.mean(np.sum(Y * np.log(P), axis=1)))
    D = P - Y
    if loss == "mse":
        return float(np.mean(D * D))
    if loss == "l1":
        return float(np.mean(np.abs(D)))
    if loss == "pnorm":
        return float(np.mean(np.abs(D) ** loss_param) / loss_param)
    A = np.abs(D)
    return float(np.mean(np.where(A <= loss_param, 0.5 * D * D, loss_param * (A - 0.5 * loss_param))))


def accuracy(P, Y, output):
    """Classification accuracy (sigmoid: threshold 0.5; softmax: argmax); None for regression."""
    if output == "sigmoid":
        return float(np.mean((P >= 0.5) == (Y >= 0.5)))
    if output == "softmax":
        return float(np.mean(np.argmax(P, axis=1) == np.argmax(Y, axis=1)))
    return None
