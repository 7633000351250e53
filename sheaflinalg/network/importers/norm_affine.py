"""The elementwise affine part of an imported normalisation, as a node of its own after the normalising node.

PyTorch's LayerNorm, GroupNorm and RMSNorm (and ONNX's LayerNormalization, GroupNormalization) scale and
shift the normalised value; the graph writes ``layernorm`` / ``groupnorm`` / ``rmsnorm`` without it and then
this part: a ``batchnorm`` node (a per-channel scale and shift) where the parameters are per channel of a
channel-first value (GroupNorm's), or where the value is flat (one channel per feature), and otherwise the
``affine`` op (parameters broadcast to the per-sample shape).  An exact identity (scale 1, shift 0) adds no node.
"""

import numpy as np

from .. import ops


def affine_part(name, op, shape, scale, shift, per_channel=False):
    """``(rule, params)`` of the node scaling and shifting a normalised value of per-sample ``shape``, or None.

    Parameters
    ----------
    name, op : str
        The layer, for a refusal.
    shape : tuple of int
        The normalised value's per-sample shape.
    scale, shift : ndarray or None
        The parameters (None: 1 and 0), shaped as the trailing axes they act on; with ``per_channel``, one
        entry per channel (axis 0 of ``shape``).

    Examples
    --------
    >>> import numpy as np
    >>> rule, params = affine_part("gn", "GroupNorm", (2, 3), np.array([2.0, 3.0]), None, per_channel=True)
    >>> rule.name, params["shift"].tolist()
    ('batchnorm', [0.0, 0.0])
    >>> affine_part("ln", "LayerNorm", (4,), np.ones(4), np.zeros(4)) is None
    True
    """
    like = scale if scale is not None else shift
    if like is None:
        return None
    scale = np.ones_like(like, dtype=np.float64) if scale is None else np.asarray(scale, dtype=np.float64)
    shift = np.zeros_like(like, dtype=np.float64) if shift is None else np.asarray(shift, dtype=np.float64)
    if np.all(scale == 1.0) and np.all(shift == 0.0):
        return None
    if per_channel or (len(shape) == 1 and scale.size == shift.size == shape[0]):
        return ops.batchnorm.RULE, {"scale": scale.reshape(-1), "shift": shift.reshape(-1)}
    return ops.affine.RULE, {"scale": scale, "shift": shift}
