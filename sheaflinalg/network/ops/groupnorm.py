"""``groupnorm``: channel-first values ``(C, *positions)`` normalised over ``groups`` groups of ``C / groups``
channels with all their positions, ``y = (x - mean) / sqrt(var + eps)`` (biased variance), without the
per-channel affine (an importer writes that as a ``batchnorm`` node); a smooth node (:mod:`.normalisation`).
``groups = 1`` normalises the whole sample, ``groups = C`` every channel (an instance norm)."""

import math

from .normalisation import Normalisation, check_count


class GroupNorm(Normalisation):
    """Groups of ``C / groups`` consecutive channels, centred; ``||J||_2 <= 1/sqrt(eps)``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("gn", "groupnorm", ["x"], {"groups": 2, "eps": 1e-5})
    >>> RULE.group_size(node, (4, 5, 5))
    50
    """

    name = "groupnorm"
    attrs = ("groups", "eps")

    def group_size(self, node, shape):
        groups = check_count(node, "groups", 1, shape[0])
        if shape[0] % groups:
            raise ValueError(f"node {node.name!r} (groupnorm): groups ({groups}) must divide the channels "
                             f"({shape[0]}) of {shape}")
        return math.prod(shape) // groups


RULE = GroupNorm()
