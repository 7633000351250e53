"""``rmsnorm``: every sample scaled over its trailing ``n_axes`` axes, ``y = x / sqrt(mean(x^2) + eps)``,
without the elementwise weight (an importer writes that as a node of its own); a smooth node
(:mod:`.normalisation`, uncentred)."""

from .layernorm import LayerNorm


class RMSNorm(LayerNorm):
    """Groups of the trailing ``n_axes`` axes, not centred; ``||J||_2 <= 1/sqrt(eps)``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("r", "rmsnorm", ["x"], {"n_axes": 1, "eps": 0.0})
    >>> RULE.shape(node, [(2,)])
    Traceback (most recent call last):
    ...
    ValueError: node 'r' (rmsnorm): eps must be a positive number (it bounds the map's norm by 1/sqrt(eps)), got 0.0
    """

    name = "rmsnorm"
    centred = False


RULE = RMSNorm()
