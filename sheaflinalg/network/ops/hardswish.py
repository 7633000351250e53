"""``hardswish``: ``z relu6(z + 3) / 6``; 0 below -3, ``z`` above 3, ``z (z + 3) / 6`` between: piecewise
quadratic, so a tangent node (its derivative, ``(2 z + 3) / 6`` between, jumps at -3 and at 3; the tangent
at a boundary takes PyTorch's gradient there: 0 at -3, 1 at 3)."""

import numpy as np

from .pointwise import Pointwise


class Hardswish(Pointwise):
    """MobileNet-V3's hard swish; ``|f'| <= 1.5``.

    Examples
    --------
    >>> import numpy as np
    >>> RULE.value(None, np.array([-4.0, 0.0, 1.0, 4.0])).round(4).tolist()
    [-0.0, 0.0, 0.6667, 4.0]
    """

    name = "hardswish"

    def value(self, node, z):
        return z * np.clip(z + 3.0, 0.0, 6.0) / 6.0

    def derivative(self, node, z):
        return np.where(z <= -3.0, 0.0, np.where(z >= 3.0, 1.0, (2.0 * z + 3.0) / 6.0))

    def slope_bound(self, node):
        return 1.5


RULE = Hardswish()
