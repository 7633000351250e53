"""``sigmoid``: ``1 / (1 + exp(-z))`` entry by entry, a smooth node (its tangent ``diag(s (1 - s))``)."""

from scipy.special import expit

from .pointwise import Pointwise


class Sigmoid(Pointwise):
    """The logistic function; ``|f'| <= 1/4``.

    Examples
    --------
    >>> import numpy as np
    >>> RULE.value(None, np.array([0.0])), RULE.derivative(None, np.array([0.0]))
    (array([0.5]), array([0.25]))
    """

    name = "sigmoid"

    def value(self, node, z):
        return expit(z)

    def derivative(self, node, z):
        return self.both(node, z)[1]

    def both(self, node, z, out=None):
        s = expit(z) if out is None else expit(z, out=out)
        return s, s * (1.0 - s)

    def slope_bound(self, node):
        return 0.25


RULE = Sigmoid()
