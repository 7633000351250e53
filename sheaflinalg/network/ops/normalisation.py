"""Normalisations over groups of entries (``layernorm``, ``groupnorm``, ``rmsnorm``): smooth nodes.

Each sample's stalk falls into ``G`` disjoint groups of ``n`` consecutive entries (C order): the trailing
axes of a layer or RMS norm, a group of channels with all their positions for a group norm.  In every
group ``g`` of a sample, with ``m`` the group's mean (centred norms) or 0 (RMS norm):

``y = (x - m) / sigma``,  ``sigma = sqrt(mean((x - m)^2) + eps)``

(the biased variance, or the mean square), without any elementwise affine: an importer writes that as a
node of its own.  The tangent of a group is the symmetric ``n x n`` matrix

``J = (I - c 11^T / n - y y^T / n) / sigma``

(``c = 1`` centred, 0 for the RMS norm): differentiate ``x - m`` (``I - c 11^T/n``) and ``1/sigma``
(``d sigma / dx = (x - m)^T / (n sigma)``).  The map is block diagonal over the groups: a CSR block of
dense groups.

**Norm bound.**  ``P = I - c 11^T/n - y y^T/n`` is symmetric.  Centred, ``sum(y) = 0`` so ``y`` is
orthogonal to ``1``; ``P`` is ``1`` on the complement of ``span(1, y)``, ``0`` on ``1`` and
``1 - |y|^2/n`` on ``y``, where ``|y|^2 / n = var / (var + eps)`` lies in ``[0, 1)``.  Uncentred, ``P`` is
``1`` on the complement of ``y`` and ``1 - ms / (ms + eps)`` on ``y``.  Either way every eigenvalue of
``P`` lies in ``[0, 1]``, so ``||P||_2 <= 1``; and ``sigma >= sqrt(eps)``.  So ``||J||_2 <= 1/sigma <=
1/sqrt(eps)`` for every group of every state: :meth:`Normalisation.norm_bound`, sound but large (316 at
torch's ``eps = 1e-5``).  At a given state :meth:`Normalisation.norm_at` gives ``max_g 1/sigma_g`` per
sample, the same bound at that state (exact for groups of three or more entries: ``P`` is 1 on a
direction orthogonal to ``1`` and ``y``).
"""

import numbers

import numpy as np

from ...kernels.normalisation import groups_tangent, normalise_groups
from .rule import csr
from .tangent import Linearisation, Tangent


def check_eps(node):
    """``node.attrs['eps']`` as a positive finite float."""
    eps = node.attrs["eps"]
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not 0 < eps < np.inf:
        raise ValueError(f"node {node.name!r} ({node.op}): eps must be a positive number (it bounds the map's "
                         f"norm by 1/sqrt(eps)), got {eps!r}")
    return float(eps)


def check_count(node, key, low, high):
    """``node.attrs[key]`` as an int in ``low..high``."""
    value = node.attrs[key]
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"node {node.name!r} ({node.op}): {key} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


class Groups(Linearisation):
    """The tangent at a batch of points: per sample and group, ``y`` and ``sigma`` (``J`` in the module)."""

    def __init__(self, y, sigma, centred):
        self.y, self.sigma, self.centred = y, sigma, centred     # (M, G, n), (M, G)

    def apply(self, i, x):
        out = np.empty(x.shape)         # one compiled pass over each group (the numpy expressions, in their order)
        groups_tangent(self.y.reshape(self.y.shape[0], -1), self.sigma, np.asarray(x, dtype=np.float64),
                       self.centred, out)
        return out

    transpose = apply       # J is symmetric

    def dense(self, s):
        """Sample ``s``'s ``J`` of every group, ``(G, n, n)``."""
        y = self.y[s]
        n = y.shape[1]
        P = np.eye(n) - np.einsum("gi,gj->gij", y, y) / n
        if self.centred:
            P -= 1.0 / n
        return P / self.sigma[s][:, None, None]

    def block(self, i, s):
        G, n = self.sigma.shape[1], self.y.shape[2]
        first = (np.arange(G) * n)[:, None, None]
        rows = np.broadcast_to(first + np.arange(n)[None, :, None], (G, n, n))
        cols = np.broadcast_to(first + np.arange(n)[None, None, :], (G, n, n))
        return csr(rows, cols, self.dense(s), (G * n, G * n))


class Normalisation(Tangent):
    """A normalisation of consecutive groups of entries; a subclass writes :meth:`group_size` (with the shape
    rule) and ``centred``."""

    attrs = ("eps",)
    centred = True
    state_bound = True

    def group_size(self, node, shape):
        """Entries per group of a parent of per-sample ``shape`` (attributes checked)."""
        self._missing("group_size")

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        check_eps(node)
        self.group_size(node, parent)
        return parent

    def spread(self, node, graph, x):
        """``(x - m, sigma)`` of rows ``x`` by group: ``(M, G, n)`` and ``(M, G)``."""
        n = self.group_size(node, graph.shapes[node.inputs[0]])
        x = x.reshape(x.shape[0], -1, n)
        if self.centred:
            x = x - x.mean(axis=2, keepdims=True)
        return x, np.sqrt(np.mean(x * x, axis=2) + check_eps(node))

    def statistics(self, node, graph, x, out=None):
        """``(y, sigma)`` of rows ``x``: ``(M, G, n)`` and ``(M, G)``, ``y`` also written into the rows ``out`` if
        given; one compiled pass a group (:func:`~sheaflinalg.kernels.normalisation.normalise_groups`)."""
        n, x = self.group_size(node, graph.shapes[node.inputs[0]]), np.asarray(x, dtype=np.float64)
        y, sigma = np.empty(x.shape), np.empty((x.shape[0], x.shape[1] // n))
        normalise_groups(x, n, self.centred, check_eps(node), y, sigma, y if out is None else out)
        return y.reshape(x.shape[0], -1, n), sigma

    def function(self, node, graph):
        return lambda inputs: self.statistics(node, graph, inputs[0])[0].reshape(inputs[0].shape)

    def groups(self, node, y, sigma):
        """The :class:`Groups` tangent of the statistics ``(y, sigma)``."""
        return Groups(y, sigma, self.centred)

    def linearise(self, node, graph, point):
        return self.groups(node, *self.statistics(node, graph, point[0]))

    def evaluated(self, node, graph):
        def both(inputs, out):      # y and sigma once, for the value (written with y) and the tangent
            return self.groups(node, *self.statistics(node, graph, inputs[0], out))
        return both

    def norm_bound(self, node, graph):
        """``1 / sqrt(eps)``: ``||J||_2 <= 1/sigma <= 1/sqrt(eps)`` for every state (the module's proof)."""
        return float(1.0 / np.sqrt(check_eps(node)))

    def norm_at(self, node, graph, rows):
        """Per sample, ``max_g 1/sigma_g`` at the linearisation points ``rows``: a bound on ``||J||_2`` there."""
        return 1.0 / self.spread(node, graph, np.atleast_2d(rows))[1].min(axis=1)

    def nnz(self, node, graph):
        size = graph.sizes[node.name]
        n = self.group_size(node, graph.shapes[node.inputs[0]])
        return size * n + size, size * n

    def work(self, node, graph):
        return 8 * graph.sizes[node.name]
