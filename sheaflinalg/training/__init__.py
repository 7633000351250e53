"""Training: the joint state/weight dynamics (``train``), the SGD baseline (``sgd``), losses,
regularisation, history, resumable checkpoints, the stagnation bound and the parameter sheaf.

May import ``sheaf``, ``network``, ``kernels`` and ``_common`` (not ``dynamics`` or ``spectral``).
"""

from .history import DivergenceWarning, History, Regularization, TrainingInfo
from .train import train
from .problem import TrainResult
from .sgd import sgd

__all__ = ["train", "sgd", "TrainResult", "History", "TrainingInfo", "Regularization", "DivergenceWarning"]
