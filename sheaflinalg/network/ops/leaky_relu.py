"""``leaky_relu``: ``z`` where ``z >= 0``, ``negative_slope * z`` elsewhere (a :class:`~.relu.Rectifier`)."""

import math
import numbers

from .relu import Rectifier
from .rule import same_shape


class LeakyReLU(Rectifier):
    """A rectifier whose inactive piece has the slope ``negative_slope``.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.slope(sl.Node("r", "leaky_relu", ["x"], {"negative_slope": 0.1}))
    0.1
    """

    name = "leaky_relu"
    attrs = ("negative_slope",)

    def shape(self, node, parent_shapes):
        slope = node.attrs["negative_slope"]
        if not isinstance(slope, numbers.Real) or isinstance(slope, bool) or not math.isfinite(slope):
            raise ValueError(f"node {node.name!r} (leaky_relu): negative_slope must be a finite number, got {slope!r}")
        return same_shape(node, parent_shapes)

    def slope(self, node):
        return float(node.attrs["negative_slope"])


RULE = LeakyReLU()
