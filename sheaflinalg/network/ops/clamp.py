"""``clamp``: ``min(max(slope * z + offset, min), max)`` entry by entry; piecewise linear with three pieces.

With ``u = slope * z + offset`` the pieces are *below* (``u < min``: the constant ``min``), the *middle*
(``min <= u <= max``: the affine ``u``) and *above* (``u > max``: the constant ``max``); the pattern
(:data:`~.rule.PIECE`) is the piece of every coordinate, -1, 0 or 1.  The restriction map is the diagonal
``slope`` on the middle coordinates and 0 elsewhere; the constant term (the ones block) is ``offset`` on
the middle coordinates and the bound on the saturated ones.  One op covers ReLU6 (``min=0, max=6``),
Hardtanh and ``torch.clamp`` (``slope=1, offset=0``) and Hardsigmoid (``slope=1/6, offset=1/2, min=0,
max=1``).

A tie (``u`` exactly at ``min`` or ``max``) takes the middle piece: the interval is closed, as a ReLU's
active piece ``z >= 0`` is (so ``relu`` and a ReLU6 agree at ``z = 0``), and as ``torch.clamp``'s gradient
is; ``F.hardtanh``, ``F.relu6`` and ``F.hardsigmoid`` give the gradient 0 there, as ``torch.relu`` does at
``z = 0``.  Both sides give the same value, so a frozen piece agrees with a tie on either side.
"""

import math
import numbers

import numpy as np

from .relu import Elementwise
from .rule import PIECE, same_shape

BELOW, MIDDLE, ABOVE = -1, 0, 1


class Clamp(Elementwise):
    """An affine map clamped to ``[min, max]`` (see the module).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("c", "clamp", ["x"], {"min": 0.0, "max": 6.0, "slope": 1.0, "offset": 0.0})   # ReLU6
    >>> RULE.read_pattern(node, None, np.array([[-1.0, 0.0, 3.0, 6.0, 7.0]])).tolist()
    [[-1, 0, 0, 0, 1]]
    >>> RULE.constant(node, None, np.array([-1, 0, 1], dtype=np.int8)).tolist()
    [0.0, 0.0, 6.0]
    """

    name = "clamp"
    attrs = ("min", "max", "slope", "offset")
    pattern = PIECE
    has_bias = True

    def shape(self, node, parent_shapes):
        for key in self.attrs:
            value = node.attrs[key]
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"node {node.name!r} (clamp): {key} must be a finite number, got {value!r}")
        if not node.attrs["min"] < node.attrs["max"]:
            raise ValueError(f"node {node.name!r} (clamp): min={node.attrs['min']!r} must be below "
                             f"max={node.attrs['max']!r}")
        return same_shape(node, parent_shapes)

    def bounds(self, node):
        """``(min, max, slope, offset)`` as floats."""
        return tuple(float(node.attrs[key]) for key in self.attrs)

    def affine(self, node, z):
        """``u = slope * z + offset``, the value the bounds clamp."""
        _, _, slope, offset = self.bounds(node)
        return slope * z + offset

    def values(self, node, u, pieces):
        """The value of every coordinate ``u`` on its piece."""
        low, high = self.bounds(node)[:2]
        return np.where(pieces == MIDDLE, u, np.where(pieces == BELOW, low, high))

    def forward(self, node, graph):
        low, high = self.bounds(node)[:2]

        def step(inputs, out, pattern, frozen):
            u = self.affine(node, inputs[0])
            if not frozen:
                pattern[...] = self.read_pattern(node, graph, inputs[0])
                np.clip(u, low, high, out=out)
                return None
            out[...] = self.values(node, u, pattern)
            return np.all(out == np.clip(u, low, high), axis=1)       # a tie agrees with either side
        return step

    def diagonal(self, node, pieces):
        """The map's diagonal for piece rows: ``slope`` in the middle, 0 on the saturated pieces (float64 rows
        are taken as it, already prepared)."""
        if pieces.dtype == np.float64:
            return pieces
        return np.where(pieces == MIDDLE, self.bounds(node)[2], 0.0)

    def constant(self, node, graph, pattern=None):
        """``offset`` on the middle coordinates, ``min`` below and ``max`` above: the value at ``z = 0`` of the
        piece."""
        pieces = np.asarray(pattern, dtype=np.int8)
        return self.values(node, np.full(pieces.shape, self.bounds(node)[3]), pieces)

    def norm_bound(self, node, graph):
        return abs(self.bounds(node)[2])

    def nnz(self, node, graph):
        size = graph.sizes[node.name]
        return 2 * size, size

    def read_pattern(self, node, graph, z, previous=None, rtol=1e-12):
        """The piece of every coordinate of ``z`` (a tie in the middle); with ``previous``, a piece whose value
        is still the clamp's up to ``rtol`` times the sample's largest ``|u|`` is kept (a solve leaves
        ``min +- 1e-16`` where the forward pass has an exact tie)."""
        low, high = self.bounds(node)[:2]
        u = self.affine(node, z)
        pieces = np.where(u < low, BELOW, np.where(u > high, ABOVE, MIDDLE)).astype(np.int8)
        if previous is not None:
            scale = rtol * np.maximum(1.0, np.abs(u).max(axis=1, keepdims=True))
            kept = np.abs(self.values(node, u, previous) - np.clip(u, low, high)) <= scale
            pieces = np.where(kept, previous, pieces).astype(np.int8)
        return pieces

    def check_pattern(self, node, graph, rows, what):
        """``rows`` (``(n_samples, size)``) as int8 pieces -1, 0 or 1."""
        if rows.dtype.kind not in "iuf" or not np.all((rows == BELOW) | (rows == MIDDLE) | (rows == ABOVE)):
            raise ValueError(f"{what} must hold the pieces -1 (below), 0 (middle) or 1 (above) of every coordinate")
        return np.ascontiguousarray(rows, dtype=np.int8)

    def selected(self, node, graph, rows):
        """The coordinates on the middle piece (the node's own, which are its parent's), ``(n_samples, size)``."""
        return rows == MIDDLE


RULE = Clamp()
