"""Smooth elementwise operations: ``x_v = f(z)`` entry by entry, with the derivative ``f'`` as the tangent.

A :class:`Pointwise` rule writes ``value(node, z)``, ``derivative(node, z)`` (numpy, on arrays) and its
``slope_bound(node)``, ``sup |f'|`` over the real line: the sound bound on its map's 2-norm for every state.
"""

import numpy as np

from .rule import same_shape
from .tangent import Linearisation, Tangent


class Diagonal(Linearisation):
    """The tangent of an elementwise op: ``diag(f'(p))`` of every sample."""

    def __init__(self, slopes):
        self.slopes = slopes

    def apply(self, i, x):
        return x * self.slopes

    transpose = apply

    def block(self, i, s):
        return self.slopes[s].copy()


class Pointwise(Tangent):
    """A smooth elementwise op of one parent."""

    shape = staticmethod(same_shape)

    def value(self, node, z):
        """``f(z)`` entry by entry."""
        self._missing("value")

    def derivative(self, node, z):
        """``f'(z)`` entry by entry."""
        self._missing("derivative")

    def slope_bound(self, node):
        """``sup |f'|`` over the real line."""
        self._missing("slope_bound")

    def both(self, node, z, out=None):
        """``(f(z), f'(z))``, the value written into ``out`` (and returned) if given (a rule whose value and
        derivative share work, GELU's ``Phi(z)``, writes its own)."""
        return into(out, self.value(node, z)), self.derivative(node, z)

    def function(self, node, graph):
        return lambda inputs: self.value(node, inputs[0])

    def linearise(self, node, graph, point):
        return Diagonal(self.derivative(node, point[0]))

    def evaluated(self, node, graph):
        def value_and_tangent(inputs, out):
            return Diagonal(self.both(node, inputs[0], out)[1])
        return value_and_tangent

    def norm_bound(self, node, graph):
        return float(self.slope_bound(node))

    def norm_at(self, node, graph, rows):
        """Per sample, ``max |f'|`` at the points ``rows``: the diagonal tangent's exact 2-norm there."""
        return np.abs(self.derivative(node, np.atleast_2d(rows))).max(axis=1, initial=0.0)

    def nnz(self, node, graph):
        n = graph.sizes[node.name]
        return 2 * n, n

    def work(self, node, graph):
        return 8 * graph.sizes[node.name]


def compiled_both(kernel, z, out, *args):
    """``(f(z), f'(z))`` from a compiled kernel ``kernel(rows, value, slope, *args)`` of float64 rows (any
    stride): ``z`` of two axes as it is, any other shape as one row, so that every float64 path of a rule
    (its value, its derivative, the forward pass with tangents) runs the same kernel; the value written into
    ``out`` (and returned) if given."""
    rows = z if z.ndim == 2 else z.reshape(1, -1)
    value = out if out is not None and z.ndim == 2 else np.empty(rows.shape)
    slope = np.empty(rows.shape)
    kernel(rows, value, slope, *args)
    if z.ndim == 2:
        return value, slope
    return into(out, value.reshape(z.shape)), slope.reshape(z.shape)


def into(out, value):
    """``value``, copied into ``out`` and ``out`` returned if ``out`` is given."""
    if out is None:
        return value
    out[...] = value
    return out
