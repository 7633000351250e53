"""``normalize``: every vector along the last per-sample axis scaled to unit length, ``y = x / max(|x|, eps)``
(PyTorch's ``F.normalize`` with ``p=2``, ``dim=-1``; the cosine attention of Swin V2); a smooth node.

Each sample's stalk falls into groups of ``n`` consecutive entries (the last axis).  In a group with
``d = max(|x|, eps)`` the tangent is the symmetric ``n x n`` matrix

``J = (I - y y^T) / d``  where ``|x| > eps``,  ``J = I / eps``  where the norm is clamped,

(differentiate ``x / |x|``: ``d|x|/dx = y^T``).  The Jacobian is the uncentred one of
:mod:`.normalisation` with the projection ``y y^T = y_s y_s^T / n`` of ``y_s = sqrt(n) y`` (and ``y_s = 0``
where clamped): :class:`~.normalisation.Groups` with ``sigma = d``.

**Norm bound.**  ``I - y y^T`` with ``|y| = 1`` is an orthogonal projection (norm 1, for ``n >= 2``; 0
for ``n = 1``, where the bound is not reached), so ``||J||_2 <= 1/d <= 1/eps`` for every group of every state:
:meth:`Normalize.norm_bound`, sound but huge (``1e12`` at torch's ``eps = 1e-12``).  At a state
:meth:`~.normalisation.Normalisation.norm_at` gives ``max_g 1/d_g`` per sample, the bound there.
"""

import numpy as np

from .normalisation import Groups, Normalisation, check_eps


class Normalize(Normalisation):
    """L2 normalisation over the last axis (see the module): the uncentred groups of :mod:`.normalisation`
    with ``sigma = max(|x|, eps)``; ``||J||_2 <= 1/eps``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.from_nodes((2, 2), [sl.Node("u", "normalize", ["x"], {"eps": 1e-12})])
    >>> net.forward(np.array([[3.0, 4.0, 0.0, 0.0]]))
    array([[0.6, 0.8, 0. , 0. ]])
    """

    name = "normalize"
    centred = False

    def group_size(self, node, shape):
        """Entries per group of a parent of per-sample ``shape``: its last axis."""
        if len(shape) == 0:
            raise ValueError(f"node {node.name!r} (normalize): its parent must have a per-sample axis to "
                             "normalise over, got a scalar")
        return shape[-1]

    def spread(self, node, graph, x):
        """``(x, d)`` of rows ``x`` by group, ``d = max(|x|, eps)``: ``(M, G, n)`` and ``(M, G)``."""
        x = x.reshape(x.shape[0], -1, self.group_size(node, graph.shapes[node.inputs[0]]))
        return x, np.maximum(np.linalg.norm(x, axis=2), check_eps(node))

    def groups(self, node, y, d):
        """The groups' ``J = (I - y_s y_s^T / n) / d`` with ``y_s = sqrt(n) y`` where ``|x| > eps``, else 0."""
        free = d > check_eps(node)
        return Groups(y * (np.sqrt(y.shape[2]) * free)[..., None], d, False)

    def statistics(self, node, graph, x, out=None):
        """``(y, d)`` of rows ``x`` by group: ``(M, G, n)`` and ``(M, G)``, ``y`` also written into ``out`` if
        given."""
        x, d = self.spread(node, graph, x)
        y = x / d[..., None]
        if out is not None:
            out[...] = y.reshape(out.shape)
        return y, d

    def norm_bound(self, node, graph):
        """``1 / eps``: ``||J||_2 <= 1/d <= 1/eps`` for every state (the module's proof)."""
        return float(1.0 / check_eps(node))


RULE = Normalize()
