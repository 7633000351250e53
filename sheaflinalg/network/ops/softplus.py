"""``softplus``: ``log(1 + exp(beta z)) / beta``, and ``z`` itself where ``beta z > threshold`` (PyTorch's rule)."""

import math
import numbers

import numpy as np
from scipy.special import expit

from .pointwise import Pointwise


class Softplus(Pointwise):
    """A smooth rectifier; ``0 < f' <= 1``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("s", "softplus", ["x"], {"beta": 1.0, "threshold": 20.0})
    >>> round(float(RULE.value(node, np.array([0.0]))[0]), 6)
    0.693147
    """

    name = "softplus"
    attrs = ("beta", "threshold")

    def shape(self, node, parent_shapes):
        for key in self.attrs:
            value = node.attrs[key]
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"node {node.name!r} (softplus): {key} must be a finite number, got {value!r}")
        if node.attrs["beta"] <= 0:
            raise ValueError(f"node {node.name!r} (softplus): beta must be positive, got {node.attrs['beta']!r}")
        return parent_shapes[0]

    def value(self, node, z):
        beta = float(node.attrs["beta"])
        bz = beta * z
        return np.where(bz > node.attrs["threshold"], z, np.logaddexp(0.0, bz) / beta)

    def derivative(self, node, z):
        bz = float(node.attrs["beta"]) * z
        return np.where(bz > node.attrs["threshold"], 1.0, expit(bz))

    def slope_bound(self, node):
        return 1.0


RULE = Softplus()
