"""Pooling on batches of flattened feature maps: averages over windows, and the max with its argmax."""

import numpy as np


def _gather(x, channels, n_in_positions, index):
    M = x.shape[0]
    padded = np.full((M, channels, n_in_positions + 1), np.nan)
    padded[:, :, :n_in_positions] = x.reshape(M, channels, n_in_positions)
    return padded[:, :, index]          # (M, C, n_out, K); NaN in the padding


def average_pool(x, channels, n_in_positions, index, divisor):
    """Mean of every window: ``sum of the window's inputs / divisor[p]`` for output position ``p``.

    ``index`` is a ``-1``-padded window table (:mod:`sheaflinalg.kernels.windows`);
    padding entries add nothing.  Returns (M, channels * n_out_positions).
    """
    windows = _gather(x, channels, n_in_positions, index)
    sums = np.where(np.isnan(windows), 0.0, windows).sum(axis=-1)
    return np.ascontiguousarray((sums / divisor[None, None, :]).reshape(x.shape[0], -1))


def max_pool(x, channels, n_in_positions, index):
    """Max of every window and its argmax, the first maximum in the window's order.

    Returns
    -------
    values : ndarray (M, channels * n_out_positions)
    argmax : ndarray of int64, same shape
        Flat position of the selected input in the per-sample stalk (``channel * n_in_positions + position``).
    """
    windows = _gather(x, channels, n_in_positions, index)
    filled = np.where(np.isnan(windows), -np.inf, windows)
    q = np.argmax(filled, axis=-1)                                   # first maximum
    pos = index[np.arange(index.shape[0])[None, None, :], q]
    argmax = pos + (np.arange(channels) * n_in_positions)[None, :, None]
    values = np.take_along_axis(filled, q[..., None], axis=-1)[..., 0]
    M = x.shape[0]
    return np.ascontiguousarray(values.reshape(M, -1)), np.ascontiguousarray(argmax.reshape(M, -1))
