"""``elu``: ``z`` for ``z > 0``, ``alpha (exp(z) - 1)`` elsewhere; smooth for ``alpha = 1``, else one kink at 0
(the tangent there takes the left piece's slope ``alpha``, as PyTorch's gradient does)."""

import math
import numbers

import numpy as np

from .pointwise import Pointwise


class ELU(Pointwise):
    """The exponential linear unit; ``|f'| <= max(1, |alpha|)``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("e", "elu", ["x"], {"alpha": 1.0})
    >>> RULE.derivative(node, np.array([-1.0, 2.0])).round(4).tolist()
    [0.3679, 1.0]
    """

    name = "elu"
    attrs = ("alpha",)

    def shape(self, node, parent_shapes):
        alpha = node.attrs["alpha"]
        if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not math.isfinite(alpha):
            raise ValueError(f"node {node.name!r} (elu): alpha must be a finite number, got {alpha!r}")
        return parent_shapes[0]

    def value(self, node, z):
        return np.where(z > 0, z, node.attrs["alpha"] * np.expm1(np.minimum(z, 0.0)))

    def derivative(self, node, z):
        return np.where(z > 0, 1.0, node.attrs["alpha"] * np.exp(np.minimum(z, 0.0)))

    def slope_bound(self, node):
        return max(1.0, abs(float(node.attrs["alpha"])))


RULE = ELU()
