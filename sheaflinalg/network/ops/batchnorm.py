"""``batchnorm``: an eval-mode batch norm folded into its per-channel affine map ``scale * x + shift``.

The running statistics are not parameters of the sheaf: the node is trained as that affine map.
"""

import numpy as np

from ...kernels.elementwise import channel_affine, checked_affine
from .relu import rectifier_slope
from .rule import OpRule, entries_touched, per_channel


class BatchNorm(OpRule):
    """A per-channel scale (the restriction map, diagonal) and shift (through the ones block).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("bn", "batchnorm", ["x"], params={"scale": np.ones(3), "shift": np.zeros(3)})
    >>> RULE.shape(node, [(3, 4, 4)])
    (3, 4, 4)
    """

    name = "batchnorm"
    params = ("scale", "shift")
    has_bias = True
    work = staticmethod(entries_touched)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        for key in ("scale", "shift"):
            if node.params[key].shape != (parent[0],):
                raise ValueError(f"node {node.name!r} (batchnorm): {key} must have one entry per channel "
                                 f"({parent[0]}), got shape {node.params[key].shape}")
        return parent

    def forward(self, node, graph):
        scale, shift = node.params["scale"], node.params["shift"]

        def step(inputs, out, pattern, frozen):
            channel_affine(inputs[0], scale, shift, out)
        return step

    def checked_forward(self, node, graph, then=None):
        scale, shift = node.params["scale"], node.params["shift"]
        slope = rectifier_slope(then)
        if then is not None and slope is None:
            return None

        def step(inputs, out, then_out, then_mask):
            return checked_affine(inputs[0], scale, shift, out, slope or 0.0, then_mask, then_out, then is not None)
        return step, True

    def blocks(self, node, graph, pattern=None):
        return [per_channel(node, graph, node.params["scale"])]

    def maps(self, node, graph):
        scale = per_channel(node, graph, node.params["scale"])[None, :]
        return (lambda i, x, p: x * scale), (lambda i, y, p: y * scale)

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return per_channel(node, graph, node.params["shift"])

    def norm_bound(self, node, graph):
        return float(np.max(np.abs(node.params["scale"]), initial=0.0))

    def velocity(self, node, graph):
        channels = node.params["scale"].size

        def velocity(x, e):
            M = e.shape[0]
            rows = e.reshape(M, channels, -1)
            return {"scale": np.einsum("scp,scp->c", rows, x.reshape(M, channels, -1)), "shift": rows.sum(axis=(0, 2))}
        return velocity

    def nnz(self, node, graph):
        size = graph.sizes[node.name]
        return 2 * size, size


RULE = BatchNorm()
