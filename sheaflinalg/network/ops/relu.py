"""``relu``: ``max(z, 0)``; piecewise linear, its pattern the mask ``z >= 0`` (active, the package's rule).

Every rectifier (:class:`Rectifier`) is ``z`` on the active piece and ``slope * z`` on the inactive
one: ReLU has slope 0, LeakyReLU its ``negative_slope`` (:mod:`.leaky_relu`).
"""

import numpy as np

from ...kernels.elementwise import rectify
from .rule import MASK, OpRule, entries_touched, parameterless, same_shape


class Elementwise(OpRule):
    """An elementwise piecewise-linear op of one parent: a diagonal map on every piece, read off its pattern rows
    by :meth:`diagonal` (written by the subclass), and no parameters."""

    shape = staticmethod(same_shape)
    velocity = staticmethod(parameterless)
    work = staticmethod(entries_touched)

    def diagonal(self, node, rows):
        """The map's diagonal for pattern rows (float64 rows are taken as it, already prepared)."""
        self._missing("diagonal")

    def blocks(self, node, graph, pattern=None):
        return [self.diagonal(node, np.asarray(pattern, dtype=self.pattern.dtype))]

    def maps(self, node, graph):
        return ((lambda i, x, p: x * self.diagonal(node, p)), (lambda i, y, p: y * self.diagonal(node, p)))

    def prepare(self, node, pattern):
        return None if pattern is None else self.diagonal(node, pattern)

    def bias(self, node, graph):
        return None

    def split_edge(self, node):
        """The edge whose residuals the pattern splits: the node's own (the pieces of its coordinates)."""
        return node.name


class Rectifier(Elementwise):
    """An elementwise piecewise-linear map with pieces ``z`` (``z >= 0``) and ``slope(node) * z``."""

    name = "relu"
    pattern = MASK

    def slope(self, node):
        """The slope of the inactive piece."""
        return 0.0

    def forward(self, node, graph):
        slope = self.slope(node)

        def step(inputs, out, pattern, frozen):
            agrees = np.ones(out.shape[0], dtype=bool)
            rectify(inputs[0], slope, pattern, out, agrees, frozen)
            return agrees if frozen else None
        return step

    def diagonal(self, node, mask):
        """The map's diagonal for mask rows: 1 active, the slope inactive (float64 rows are taken as it)."""
        if mask.dtype == np.float64:
            return mask
        return np.where(mask, 1.0, self.slope(node))

    def norm_bound(self, node, graph):
        return max(1.0, abs(self.slope(node)))

    def nnz(self, node, graph):
        size = graph.sizes[node.inputs[0]]
        return size, size

    def read_pattern(self, node, graph, z, previous=None, rtol=1e-12):
        """The mask ``z >= 0`` (``previous`` and ``rtol`` are for selections; a mask has no ties to keep)."""
        return z >= 0

    def check_pattern(self, node, graph, rows, what):
        """``rows`` (``(n_samples, size)``) as a bool mask (0/1 numbers are accepted)."""
        if rows.dtype != bool:
            if rows.dtype.kind not in "iuf" or not np.all((rows == 0) | (rows == 1)):
                raise ValueError(f"{what} must be boolean (or 0/1), got dtype {rows.dtype}")
            rows = rows.astype(bool)
        return np.ascontiguousarray(rows)

    def selected(self, node, graph, rows):
        """The active coordinates (the node's own, which are its parent's), ``(n_samples, size)`` bool."""
        return rows.copy()


RULE = Rectifier()


def rectifier_slope(node):
    """The inactive slope of a rectifier node (relu, leaky_relu), None for any other node (or None).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> rectifier_slope(sl.Node("r", "relu", ["x"])), rectifier_slope(sl.Node("s", "add", ["x", "x"]))
    (0.0, None)
    """
    if node is None or not isinstance(node.rule, Rectifier):
        return None
    return float(node.rule.slope(node))
