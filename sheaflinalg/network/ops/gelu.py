"""``gelu``: ``z Phi(z)`` (``approximate="none"``) or its tanh form (``"tanh"``), a smooth node.

Both derivatives peak just above 1.128 (at ``z`` near ``sqrt(2)``) and stay above ``-0.17``: 1.13 bounds
their absolute value (checked on a fine grid in the tests).
"""

import numpy as np
from scipy.special import ndtr

from ...kernels.elementwise import GELU_C as _C
from ...kernels.elementwise import GELU_K as _K
from ...kernels.elementwise import gelu_both
from .pointwise import Pointwise, compiled_both, into

APPROXIMATIONS = ("none", "tanh")


class GELU(Pointwise):
    """The Gaussian error linear unit, exact or tanh-approximated (PyTorch's ``approximate``).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("g", "gelu", ["x"], {"approximate": "none"})
    >>> float(RULE.value(node, np.array([1.0]))[0])     # Phi(1)
    0.8413447460685429
    """

    name = "gelu"
    attrs = ("approximate",)

    def shape(self, node, parent_shapes):
        if node.attrs["approximate"] not in APPROXIMATIONS:
            raise ValueError(f"node {node.name!r} (gelu): approximate must be one of {APPROXIMATIONS}, got "
                             f"{node.attrs['approximate']!r}")
        return parent_shapes[0]

    def value(self, node, z):
        return self.both(node, z)[0]

    def derivative(self, node, z):
        return self.both(node, z)[1]

    def both(self, node, z, out=None):
        if z.dtype == np.float64:       # one compiled pass (every float64 path: the same values bit for bit)
            return compiled_both(gelu_both, z, out, node.attrs["approximate"] == "tanh")
        gate = self._gate(node, z)          # Phi(z) (or the tanh) once for both
        return into(out, self._value(node, z, gate)), self._derivative(node, z, gate)

    @staticmethod
    def _gate(node, z):
        """``Phi(z)``, or ``tanh(K (z + C z^3))`` for the tanh form."""
        if node.attrs["approximate"] == "tanh":
            return np.tanh(_K * (z + _C * z ** 3))
        return ndtr(z)

    @staticmethod
    def _value(node, z, gate):
        if node.attrs["approximate"] == "tanh":
            return 0.5 * z * (1.0 + gate)
        return z * gate

    @staticmethod
    def _derivative(node, z, gate):
        if node.attrs["approximate"] == "tanh":
            return 0.5 * (1.0 + gate) + 0.5 * z * (1.0 - gate * gate) * _K * (1.0 + 3.0 * _C * z * z)
        return gate + z * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)

    def slope_bound(self, node):
        return 1.13


RULE = GELU()
