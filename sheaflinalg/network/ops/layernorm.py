"""``layernorm``: every sample normalised over its trailing ``n_axes`` axes (PyTorch's ``normalized_shape``),
``y = (x - mean) / sqrt(var + eps)`` with the biased variance, without the elementwise affine (an importer
writes that as a node of its own); a smooth node (:mod:`.normalisation`)."""

import math

from .normalisation import Normalisation, check_count


class LayerNorm(Normalisation):
    """Groups of the trailing ``n_axes`` axes, centred; ``||J||_2 <= 1/sqrt(eps)``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("ln", "layernorm", ["x"], {"n_axes": 1, "eps": 1e-5})
    >>> RULE.shape(node, [(4, 3)]), RULE.group_size(node, (4, 3))
    ((4, 3), 3)
    """

    name = "layernorm"
    attrs = ("n_axes", "eps")

    def group_size(self, node, shape):
        n_axes = check_count(node, "n_axes", 1, len(shape))
        return math.prod(shape[len(shape) - n_axes:])


RULE = LayerNorm()
