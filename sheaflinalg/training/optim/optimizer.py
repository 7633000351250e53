"""The optimiser interface: hyper-parameters in the object, the moving state in arrays the caller keeps.

An optimiser is a small immutable description (learning rate, decay rates,
weight decay).  Its state (moment vectors, momentum buffer) lives in a dict of
float64 arrays made by :meth:`Optimizer.init_state` and updated in place by
:meth:`Optimizer.update`, together with the step count ``t`` the caller passes:
a training run saves that dict in its checkpoint and continues bit for bit,
and an optimiser given by the user is never modified by a run.
"""

import numpy as np

from ..._common.validation import check_positive, check_real


def check_rate(value, name, low=0.0, high=1.0):
    """A decay rate (momentum, beta1, beta2) as a float in ``[low, high)``, else an error naming it."""
    value = check_real(value, name)
    if not low <= value < high:
        raise ValueError(f"{name} must lie in [{low:g}, {high:g}), got {value!r}")
    return value


def check_decay(value, name="weight_decay"):
    """A weight decay as a finite float ``>= 0``."""
    value = check_real(value, name)
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


class Optimizer:
    """Base class: ``update(theta, grad, state, t, lr)`` moves ``theta`` in place against ``grad``.

    Parameters
    ----------
    lr : float
        Base learning rate (finite, > 0); a schedule multiplies it step by step.
    weight_decay : float
        Strength of the decay toward zero (its meaning is the subclass's).

    Attributes
    ----------
    slots : tuple of str
        Names of the state arrays (each of ``theta``'s shape).
    """

    slots = ()
    name = "optimizer"

    def __init__(self, lr, weight_decay=0.0):
        self.lr = check_positive(lr, "lr")
        self.weight_decay = check_decay(weight_decay)

    def init_state(self, n):
        """Fresh state for ``n`` parameters: ``{slot: zeros(n)}``."""
        return {slot: np.zeros(n) for slot in self.slots}

    def update(self, theta, grad, state, t, lr=None):
        """One step, in place.

        Parameters
        ----------
        theta : ndarray, float64
            Parameters (modified).
        grad : ndarray, float64
            Gradient of the loss at ``theta`` (not modified).
        state : dict
            :meth:`init_state`'s arrays (modified).
        t : int
            This step's number, 1 for the first (bias corrections, the first momentum step).
        lr : float, optional
            This step's learning rate (default :attr:`lr`).
        """
        raise NotImplementedError

    def hyperparameters(self):
        """The settings as a plain dict (a run's checkpoint fingerprint holds them)."""
        return dict(vars(self), name=self.name)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None
