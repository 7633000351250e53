"""Learning-rate schedules: the factor on the optimiser's base rate at each step, with optional linear warm-up.

A schedule is asked ``factor(t, total)`` for the 0-based step ``t`` of a run of
``total`` optimiser steps (mini-batches).  During the first ``warmup`` steps the
factor rises linearly, ``(t + 1) / (warmup + 1)``; afterwards the schedule's own
decay runs over the remaining ``total - warmup`` steps, from 1.
"""

import math

from ..._common.validation import check_int, check_real


class Schedule:
    """Base class: :meth:`decay` of the step after the warm-up, times the warm-up's ramp.

    Parameters
    ----------
    warmup : int
        Steps of linear warm-up (0: none); must be fewer than the run's steps.
    """

    name = "schedule"

    def __init__(self, warmup=0):
        self.warmup = check_int(warmup, "warmup", minimum=0)

    def check(self, total):
        """Refuse a warm-up that does not leave a step of the run's ``total`` (before any work)."""
        if self.warmup >= total:
            raise ValueError(f"the schedule's warm-up ({self.warmup} steps) must be shorter than the run "
                             f"({total} optimiser steps)")

    def factor(self, t, total):
        """The factor on the base learning rate at 0-based step ``t`` of ``total``."""
        if t < self.warmup:
            return (t + 1) / (self.warmup + 1)
        return self.decay(t - self.warmup, total - self.warmup)

    def decay(self, s, n):
        """Factor at step ``s`` of the ``n`` steps after the warm-up (1 at ``s = 0``)."""
        raise NotImplementedError

    def hyperparameters(self):
        """The settings as a plain dict (a run's checkpoint fingerprint holds them)."""
        return dict(vars(self), name=self.name)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None


class Constant(Schedule):
    """The base rate throughout (after the warm-up).

    Examples
    --------
    >>> [Constant(warmup=3).factor(t, 10) for t in range(5)]
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    name = "constant"

    def decay(self, s, n):
        return 1.0


class Step(Schedule):
    """Multiply the rate by ``gamma`` every ``every`` steps; ``every=None``: at a third and two thirds of the run.

    Examples
    --------
    >>> [Step(every=2, gamma=0.5).factor(t, 6) for t in range(6)]
    [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """

    name = "step"

    def __init__(self, every=None, gamma=0.1, warmup=0):
        super().__init__(warmup)
        self.every = None if every is None else check_int(every, "every")
        self.gamma = _fraction(gamma, "gamma")

    def decay(self, s, n):
        every = self.every if self.every is not None else max(1, -(-n // 3))
        return self.gamma ** (s // every)


class Exponential(Schedule):
    """Multiply the rate by ``gamma`` every step; ``gamma=None`` decays to 1/100 of it by the last step.

    Examples
    --------
    >>> round(Exponential().factor(100, 101), 12)
    0.01
    """

    name = "exponential"

    def __init__(self, gamma=None, warmup=0):
        super().__init__(warmup)
        self.gamma = None if gamma is None else _fraction(gamma, "gamma")

    def decay(self, s, n):
        if self.gamma is not None:
            return self.gamma ** s
        return 0.01 ** (s / max(n - 1, 1))


class Cosine(Schedule):
    """Half a cosine from the base rate down to ``final`` times it at the end of the run (Loshchilov & Hutter).

    ``factor = final + (1 - final) (1 + cos(pi s / n)) / 2``.

    Examples
    --------
    >>> [round(Cosine().factor(t, 4), 6) for t in range(4)]
    [1.0, 0.853553, 0.5, 0.146447]
    """

    name = "cosine"

    def __init__(self, final=0.0, warmup=0):
        super().__init__(warmup)
        final = check_real(final, "final")
        if not 0.0 <= final <= 1.0:
            raise ValueError(f"final must lie in [0, 1] (a fraction of the base rate), got {final!r}")
        self.final = final

    def decay(self, s, n):
        return self.final + (1.0 - self.final) * 0.5 * (1.0 + math.cos(math.pi * s / n))


def _fraction(value, name):
    value = check_real(value, name)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1] (a factor on the learning rate), got {value!r}")
    return value
