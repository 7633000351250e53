"""``tanh``: the hyperbolic tangent entry by entry, a smooth node (its tangent ``diag(1 - tanh^2)``)."""

import numpy as np

from .pointwise import Pointwise


class Tanh(Pointwise):
    """``tanh``; ``|f'| <= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> RULE.derivative(None, np.array([0.0]))
    array([1.])
    """

    name = "tanh"

    def value(self, node, z):
        return np.tanh(z)

    def derivative(self, node, z):
        t = np.tanh(z)
        return 1.0 - t * t

    def slope_bound(self, node):
        return 1.0


RULE = Tanh()
