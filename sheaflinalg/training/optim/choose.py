"""Optimisers and schedules from names (``optimizer="adam"``, ``schedule="cosine"``) or instances."""

from ..._common.validation import did_you_mean
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .schedules import Constant, Cosine, Exponential, Schedule, Step
from .sgd import SGD, Momentum

#: Optimiser names and their classes (``"nesterov"``: momentum with Nesterov's look-ahead).
OPTIMIZERS = {"sgd": SGD, "momentum": Momentum, "nesterov": Momentum, "adam": Adam, "adamw": AdamW}
#: The learning rate of an optimiser given by name when ``lr`` is not given.
DEFAULT_LR = {"sgd": 0.01, "momentum": 0.01, "nesterov": 0.01, "adam": 1e-3, "adamw": 1e-3}
SCHEDULES = {"constant": Constant, "step": Step, "exponential": Exponential, "cosine": Cosine}


def make_optimizer(optimizer, lr=None):
    """An :class:`Optimizer` from a name (built with ``lr``, or its default rate) or an instance (``lr=None``).

    Examples
    --------
    >>> make_optimizer("adam", 1e-2)
    Adam(lr=0.01, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-08)
    >>> make_optimizer("adma")
    Traceback (most recent call last):
    ...
    ValueError: unknown optimizer 'adma'; did you mean 'adam'?
    """
    if isinstance(optimizer, Optimizer):
        if lr is not None:
            raise ValueError(f"give lr to the optimizer instance ({optimizer!r}), not as well to the call "
                             f"(got lr={lr!r})")
        return optimizer
    key = _known(optimizer, OPTIMIZERS, "optimizer")
    lr = DEFAULT_LR[key] if lr is None else lr
    return OPTIMIZERS[key](lr, nesterov=True) if key == "nesterov" else OPTIMIZERS[key](lr)


def make_schedule(schedule):
    """A :class:`Schedule` from a name (its defaults), an instance, or None (constant).

    Examples
    --------
    >>> make_schedule("cosine")
    Cosine(warmup=0, final=0.0)
    >>> make_schedule("cosin")
    Traceback (most recent call last):
    ...
    ValueError: unknown schedule 'cosin'; did you mean 'cosine'?
    """
    if schedule is None:
        return Constant()
    if isinstance(schedule, Schedule):
        return schedule
    return SCHEDULES[_known(schedule, SCHEDULES, "schedule")]()


def _known(name, table, what):
    """The key of ``table`` that ``name`` spells (any case), else an error with did-you-mean."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a name ({', '.join(table)}) or a sheaflinalg.optim {what}, "
                        f"got {type(name).__name__} {name!r}")
    key = name.lower()
    if key not in table:
        raise ValueError(f"unknown {what} {name!r}; {did_you_mean(key, table)}")
    return key
