"""The settings of quasi-static (equilibrium) training, validated before any work.

:data:`DEFAULTS` are the options only ``train(method="equilibrium")`` uses;
:class:`EquilibriumSettings` checks them with the options every method shares.
"""

from dataclasses import dataclass

from ..._common.validation import check_bool, check_int, check_positive
from ..batches import batches_per_epoch, check_batch_size
from ..epochs import check_loop_settings
from ..output_edge import GRAPH_LOSSES
from ..optim import make_optimizer, make_schedule

#: Options of ``train(method="equilibrium")`` and their defaults (``batch_size=None``: 100, or all samples
#: when there are fewer; ``lr=None``: the optimiser's default rate; ``schedule=None``: constant).
#: The nudging 1e-6 was measured (MNIST-1D, [40, 100, 100, 10], batches of 100, at the initial weights
#: and after 10 epochs): the gradient's distance to backprop's is ~14 b relative (1e-5 at 1e-6) with one
#: pattern iteration and no sliding; from 1e-4 on some batches flip a ReLU near its switching surface
#: (relative error ~1e-2, 2-6 iterations), and below 1e-7 the solver's rounding, ~1e-13 / b, takes over.
DEFAULTS = dict(epochs=100, batch_size=None, optimizer="adam", lr=None, schedule=None, nudging=1e-6,
                symmetric=False, max_pattern_iterations=20)
DEFAULT_BATCH = 100
#: The share of the nudging's own bias that an equilibrium iteration may leave as error when it stops on an
#: a-posteriori bound instead of the step that would confirm convergence (the smooth path's rule:
#: :func:`~sheaflinalg.training.equilibrium.smooth.settling_tolerance`).  The bias is ``O(b)`` relative for
#: one-sided nudging and ``O(b^2)`` for symmetric; the error left is then at most 1% of it.
BIAS_SHARE = 1e-2


@dataclass
class EquilibriumSettings:
    """Validated settings of one ``train(method="equilibrium")`` call (names as in its signature).

    ``steps`` is the run's number of optimiser steps (mini-batches), ``epoch_steps`` an epoch's.
    """

    epochs: int
    batch_size: int
    optimizer: object
    schedule: object
    nudging: float
    symmetric: bool
    max_pattern_iterations: int
    record_every: int
    seed: object
    callback_every: int
    blas_threads: object
    checkpoint_every: int
    epoch_steps: int
    steps: int

    @classmethod
    def check(cls, prob, *, epochs, batch_size, optimizer, lr, schedule, nudging, symmetric, max_pattern_iterations,
              record_every, seed, callback, callback_every, blas_threads, checkpoint_every):
        """Every setting checked before any work; errors name the parameter."""
        n = prob.X.shape[0]
        if prob.loss not in GRAPH_LOSSES:
            raise ValueError(f"train(method='equilibrium') takes the losses {', '.join(GRAPH_LOSSES)}, got "
                             f"{prob.loss!r}; the l1, p-norm and Huber losses train with method='euler'")
        epochs = check_int(epochs, "epochs")
        batch_size = check_batch_size(min(DEFAULT_BATCH, n) if batch_size is None else batch_size, n)
        optimizer = make_optimizer(optimizer, None if lr is None else check_positive(lr, "lr"))
        schedule = make_schedule(schedule)
        epoch_steps = batches_per_epoch(n, batch_size)
        steps = epochs * epoch_steps
        schedule.check(steps)
        nudging = check_positive(nudging, "nudging")
        symmetric = check_bool(symmetric, "symmetric")
        max_pattern_iterations = check_int(max_pattern_iterations, "max_pattern_iterations")
        record_every, callback_every, checkpoint_every = check_loop_settings(
            epoch_steps, record_every=record_every, seed=seed, callback=callback, callback_every=callback_every,
            blas_threads=blas_threads, checkpoint_every=checkpoint_every)
        return cls(epochs, batch_size, optimizer, schedule, nudging, symmetric, max_pattern_iterations, record_every,
                   seed, callback_every, blas_threads, checkpoint_every, epoch_steps, steps)

    @property
    def n_epochs(self):
        return self.epochs

    def identity(self):
        """The settings in a checkpoint's fingerprint (plain values)."""
        return dict(method="equilibrium", epochs=self.epochs, batch_size=self.batch_size,
                    optimizer=self.optimizer.hyperparameters(), schedule=self.schedule.hyperparameters(),
                    nudging=self.nudging, symmetric=self.symmetric,
                    max_pattern_iterations=self.max_pattern_iterations)

    def identity_arrays(self):
        """Arrays in a checkpoint's fingerprint beyond the data and the initial weights (none)."""
        return []


def lr_of(cfg, step):
    """The learning rate of 0-based optimiser step ``step``: the base rate times the schedule's factor."""
    return cfg.optimizer.lr * cfg.schedule.factor(step, cfg.steps)


