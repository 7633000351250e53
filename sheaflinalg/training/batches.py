"""Mini-batches of one epoch: the samples shuffled by the run's generator, the last partial batch kept.

The order is drawn from the run's ``numpy.random.Generator`` at the start of
every epoch, so a run resumed from a checkpoint (which saves the generator's
state after an epoch) draws the same batches as one that never stopped.
"""

from .._common.validation import check_int


def check_batch_size(batch_size, n_samples):
    """``batch_size`` as an int in ``[1, n_samples]``, else an error naming both; None is the whole data.

    Examples
    --------
    >>> check_batch_size(None, 50), check_batch_size(20, 50)
    (50, 20)
    >>> check_batch_size(64, 50)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be at most the number of training samples (50), got 64
    """
    if batch_size is None:
        return n_samples
    batch_size = check_int(batch_size, "batch_size")
    if batch_size > n_samples:
        raise ValueError(f"batch_size must be at most the number of training samples ({n_samples}), "
                         f"got {batch_size}")
    return batch_size


def batches_per_epoch(n_samples, batch_size):
    """Number of mini-batches in an epoch (the last one partial when ``batch_size`` does not divide)."""
    return -(-n_samples // batch_size)


def epoch_batches(n_samples, batch_size, rng):
    """The index arrays of one epoch's mini-batches, in a random order drawn from ``rng``.

    Examples
    --------
    >>> import numpy as np
    >>> parts = epoch_batches(7, 3, np.random.default_rng(0))
    >>> [len(p) for p in parts], sorted(np.concatenate(parts).tolist())
    ([3, 3, 1], [0, 1, 2, 3, 4, 5, 6])
    """
    order = rng.permutation(n_samples)
    return [order[i:i + batch_size] for i in range(0, n_samples, batch_size)]
