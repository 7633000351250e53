"""``silu``: ``z sigmoid(z)`` (the swish), a smooth node; ``f' = s (1 + z (1 - s))`` lies in ``[-0.1, 1.1]``."""

import numpy as np
from scipy.special import expit

from ...kernels.elementwise import silu_both
from .pointwise import Pointwise, compiled_both, into


class SiLU(Pointwise):
    """The sigmoid-weighted linear unit; ``|f'| <= 1.1`` (its maximum is about 1.0998, checked in the tests).

    Examples
    --------
    >>> import numpy as np
    >>> RULE.value(None, np.array([0.0, 1.0])).round(4).tolist()
    [0.0, 0.7311]
    """

    name = "silu"

    def value(self, node, z):
        return self.both(node, z)[0]

    def derivative(self, node, z):
        return self.both(node, z)[1]

    def both(self, node, z, out=None):
        if z.dtype == np.float64:       # one compiled pass (numpy's expressions to rounding)
            return compiled_both(silu_both, z, out)
        s = expit(z)
        return into(out, z * s), s * (1.0 + z * (1.0 - s))

    def slope_bound(self, node):
        return 1.1


RULE = SiLU()
