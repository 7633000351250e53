"""``mish``: ``z tanh(softplus(z))``, a smooth node; its derivative lies in ``[-0.31, 1.09]``."""

import numpy as np
from scipy.special import expit

from .pointwise import Pointwise


class Mish(Pointwise):
    """Mish; ``|f'| <= 1.09`` (its maximum is about 1.0886, checked in the tests).

    Examples
    --------
    >>> import numpy as np
    >>> RULE.value(None, np.array([0.0])).tolist()
    [0.0]
    """

    name = "mish"

    def value(self, node, z):
        return z * np.tanh(np.logaddexp(0.0, z))

    def derivative(self, node, z):
        t = np.tanh(np.logaddexp(0.0, z))
        return t + z * (1.0 - t * t) * expit(z)

    def slope_bound(self, node):
        return 1.09


RULE = Mish()
