"""Adam and AdamW (decoupled weight decay)."""

import math

import numpy as np

from ..._common.validation import check_positive
from .optimizer import Optimizer, check_rate


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015): steps scaled by bias-corrected first and second moments of the gradient.

    With ``g = grad + weight_decay * theta`` (L2 decay, coupled to the gradient)::

        m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
        theta -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

    (evaluated as ``torch.optim.Adam`` does, which agrees to rounding).

    Parameters
    ----------
    lr : float
    betas : (float, float)
        Decay rates of the moments, each in ``[0, 1)``.
    eps : float
        Added to the root of the second moment (> 0).
    weight_decay : float, optional
        L2 decay added to the gradient (default 0; AdamW: decoupled, default 0.01).

    Examples
    --------
    >>> import numpy as np
    >>> opt = Adam(lr=0.1)
    >>> theta, state = np.array([1.0, -2.0]), opt.init_state(2)
    >>> opt.update(theta, np.array([3.0, -0.5]), state, 1)
    >>> np.round(theta, 6).tolist()     # the first step is lr * sign(grad)
    [0.9, -1.9]
    """

    name = "adam"
    slots = ("exp_avg", "exp_avg_sq")
    decoupled = False
    default_decay = 0.0

    def __init__(self, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=None):
        super().__init__(lr, self.default_decay if weight_decay is None else weight_decay)
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.betas = (check_rate(betas[0], "betas[0]"), check_rate(betas[1], "betas[1]"))
        self.eps = check_positive(eps, "eps")

    def update(self, theta, grad, state, t, lr=None):
        lr = self.lr if lr is None else lr
        b1, b2 = self.betas
        if self.decoupled:
            theta *= 1.0 - lr * self.weight_decay
            g = grad
        else:
            g = grad + self.weight_decay * theta if self.weight_decay else grad
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * (g * g)
        denom = np.sqrt(v)
        denom /= math.sqrt(1.0 - b2 ** t)
        denom += self.eps
        theta -= (lr / (1.0 - b1 ** t)) * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): ``theta *= 1 - lr * weight_decay``
    before the Adam step, the gradient itself undecayed (``torch.optim.AdamW``; default decay 0.01).

    Examples
    --------
    >>> AdamW(lr=1e-3, weight_decay=1e-2).weight_decay
    0.01
    """

    name = "adamw"
    decoupled = True
    default_decay = 0.01
