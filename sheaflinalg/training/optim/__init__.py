"""Optimisers and learning-rate schedules for the weights (``sl.optim``).

Optimisers act in place on a flat float64 parameter vector with its gradient;
their state is a dict of arrays the caller keeps (a training run saves it in its
checkpoint): ``optimizer`` (the interface), ``sgd`` (SGD and momentum, heavy
ball or Nesterov), ``adam`` (Adam, AdamW), ``schedules`` (constant, step,
exponential, cosine; linear warm-up), ``choose`` (from names).

Examples
--------
>>> import numpy as np, sheaflinalg as sl
>>> opt = sl.optim.AdamW(lr=1e-3, weight_decay=1e-2)
>>> theta = np.ones(3); state = opt.init_state(theta.size)
>>> opt.update(theta, np.array([1.0, 0.0, -1.0]), state, t=1)
>>> np.round(theta, 6).tolist()
[0.99899, 0.99999, 1.00099]
"""

from .adam import Adam, AdamW
from .choose import DEFAULT_LR, OPTIMIZERS, SCHEDULES, make_optimizer, make_schedule
from .optimizer import Optimizer
from .schedules import Constant, Cosine, Exponential, Schedule, Step
from .sgd import SGD, Momentum

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "Schedule", "Constant", "Step", "Exponential",
           "Cosine", "make_optimizer", "make_schedule", "OPTIMIZERS", "SCHEDULES", "DEFAULT_LR"]
