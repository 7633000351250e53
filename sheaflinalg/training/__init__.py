"""Training: the joint state/weight dynamics and quasi-static training at exact equilibria (``train``),
the SGD baseline (``sgd``), optimisers and schedules (``optim``), mini-batches, losses,
regularisation, history, resumable checkpoints, the stagnation bound and the parameter sheaf.

May import ``sheaf``, ``network``, ``kernels`` and ``_common`` (not ``dynamics`` or ``spectral``).
"""

from . import optim
from .equilibrium import UnsettledWarning
from .history import DivergenceWarning, History, Regularization, TrainingInfo
from .train import train
from .problem import TrainResult
from .sgd import sgd

__all__ = ["train", "sgd", "TrainResult", "History", "TrainingInfo", "Regularization", "DivergenceWarning",
           "UnsettledWarning", "optim"]
