"""Targets of a pinned classifier: its logits with the true class put in the place of its answer."""

import numpy as np


def relabelled(logits, labels):
    """The logits with, in each row, the entries of the true class and of the predicted (largest) one exchanged.

    The true class then wins with the margin the network gave its own answer; a correctly
    classified row is unchanged.

    Examples
    --------
    >>> relabelled(np.array([[1.0, 3.0, 2.0], [5.0, 0.0, 1.0]]), np.array([2, 0])).tolist()
    [[1.0, 2.0, 3.0], [5.0, 0.0, 1.0]]
    """
    out = np.array(logits, dtype=np.float64)
    rows = np.arange(out.shape[0])
    predicted = out.argmax(axis=1)
    out[rows, labels], out[rows, predicted] = out[rows, predicted], out[rows, labels]
    return out
