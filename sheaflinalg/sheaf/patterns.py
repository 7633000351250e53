"""Activation patterns: validated hidden-layer masks and the linearised output map.

Shared by assembly, harmonic extension and the spectral drivers (one place
below all of them, so none needs to import another for these helpers).
"""

import numpy as np

from ..network import activations


def normalise_pattern(net, pattern, n_samples):
    """Validate an activation pattern and return it as a list of (n_samples, n_l) bool arrays.

    ``pattern`` is a sequence with one entry per hidden layer; each entry has
    shape ``(n_l,)`` (shared by every sample) or ``(n_samples, n_l)``.
    Values must be boolean or 0/1.
    """
    k = net.n_hidden
    if isinstance(pattern, (str, bytes)) or not hasattr(pattern, "__len__"):
        raise TypeError(f"pattern must be a sequence of masks, one per hidden layer ({k}), "
                        f"got {type(pattern).__name__}")
    if len(pattern) != k:
        raise ValueError(f"pattern needs one mask per hidden layer ({k}), got {len(pattern)}")
    out = []
    for l, (mask, n) in enumerate(zip(pattern, net.dims[1:-1]), start=1):
        try:
            m = np.asarray(mask)
        except ValueError:
            raise ValueError(f"pattern layer {l} is ragged") from None
        if m.dtype != bool:
            if m.dtype.kind not in "iuf" or not np.all((m == 0) | (m == 1)):
                raise ValueError(f"pattern layer {l} must be boolean (or 0/1)")
            m = m.astype(bool)
        if m.ndim == 1:
            m = np.broadcast_to(m, (n_samples, m.size))
        if m.shape != (n_samples, n):
            raise ValueError(f"pattern layer {l} has shape {np.shape(mask)}; expected ({n},) or ({n_samples}, {n})")
        out.append(np.ascontiguousarray(m))
    return out


def output_jacobian(output, z):
    """Linearised output restriction map at ``z``: diagonal (1-D) or dense for softmax."""
    if output == "softmax":
        return activations.jacobian(output, z)
    if output == "identity":
        return np.ones(z.size)
    return np.diag(activations.jacobian(output, z)).copy()
