"""Stochastic gradient descent, with heavy-ball or Nesterov momentum."""

from ..._common.validation import check_bool
from .optimizer import Optimizer, check_rate


class SGD(Optimizer):
    """``theta -= lr * d``, ``d`` the gradient, its momentum average, or Nesterov's look-ahead of it.

    With ``g = grad + weight_decay * theta`` (L2 decay, coupled to the gradient)
    and momentum ``mu > 0``, the buffer is ``buf = g`` at the first step and
    ``buf = mu buf + g`` after; the step direction is ``buf`` (heavy ball) or
    ``g + mu buf`` (``nesterov=True``), the convention of ``torch.optim.SGD``.

    Parameters
    ----------
    lr : float
    momentum : float, optional
        In ``[0, 1)``; 0 (the default) is plain gradient descent (:class:`Momentum`: default 0.9, > 0).
    nesterov : bool
        Nesterov's look-ahead (needs ``momentum > 0``).
    weight_decay : float

    Examples
    --------
    >>> import numpy as np
    >>> opt = SGD(lr=0.1, momentum=0.5)
    >>> theta, state = np.array([1.0]), opt.init_state(1)
    >>> for t in (1, 2):
    ...     opt.update(theta, np.array([1.0]), state, t)
    >>> theta.tolist()          # steps 0.1 and 0.1 * (0.5 + 1)
    [0.75]
    """

    name = "sgd"
    default_momentum = 0.0

    def __init__(self, lr, momentum=None, nesterov=False, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.momentum = check_rate(self.default_momentum if momentum is None else momentum, "momentum")
        self.nesterov = check_bool(nesterov, "nesterov")
        if self.default_momentum and self.momentum == 0:
            raise ValueError("Momentum needs momentum > 0 (use SGD for plain gradient descent)")
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov=True needs momentum > 0 (Nesterov's look-ahead is of the momentum buffer)")

    @property
    def slots(self):
        return ("momentum_buffer",) if self.momentum > 0 else ()

    def update(self, theta, grad, state, t, lr=None):
        lr = self.lr if lr is None else lr
        g = grad + self.weight_decay * theta if self.weight_decay else grad
        if self.momentum > 0:
            buf = state["momentum_buffer"]
            if t == 1:
                buf[:] = g
            else:
                buf *= self.momentum
                buf += g
            g = g + self.momentum * buf if self.nesterov else buf
        theta -= lr * g


class Momentum(SGD):
    """:class:`SGD` with heavy-ball momentum 0.9 by default (``nesterov=True``: Nesterov's).

    Examples
    --------
    >>> Momentum(lr=0.01)
    Momentum(lr=0.01, weight_decay=0.0, momentum=0.9, nesterov=False)
    """

    name = "momentum"
    default_momentum = 0.9
