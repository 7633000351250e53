"""The window tables of a graph's nodes, estimated while the graph is built.

:class:`~sheaflinalg.network.graph.graph.Graph` calls :func:`check_node_table` for every node, so a
network whose convolution or pooling tables cannot fit in memory (a ``(1, 10**9)`` max-pool input, a
200-byte file with ``kernel_size`` ``2**40``, an adaptive pool to ``10**9`` outputs) is refused when
it is made or loaded, with :class:`~sheaflinalg._common.memory.InsufficientMemoryError` naming the
node, before any table exists (the checked builders of the call sites: :mod:`sheaflinalg.network.windows`).
"""

from ...kernels.windows import adaptive_table_bytes, window_table_bytes
from ..windows import check_table
from .nodes import window_geometry

#: Nodes whose shape rule builds their window table (it checks that no window reads only padding).
BUILT_BY_SHAPE_RULE = ("avgpool", "maxpool")


def node_table_bytes(node, parent, shape):
    """Peak bytes of the window table of ``node`` (0 for a node without one), its input of shape
    ``parent`` and its output of shape ``shape`` (per sample; needed by adaptive pools only)."""
    if node.op == "adaptive_avgpool":
        return adaptive_table_bytes(parent[1:], shape[1:])
    if node.op in ("conv",) + BUILT_BY_SHAPE_RULE:
        return window_table_bytes(*window_geometry(node, parent))
    return 0


def check_node_table(node, parent, shape=None):
    """Refuse ``node`` of a graph being built if its window table would not fit in memory.

    Called before the node's shape rule (``shape`` None) and after it (``shape``: its output shape):
    the pools' rule builds their table, so they are estimated before it; a convolution's and an
    adaptive pool's geometry is checked by their rule, so they are estimated after it.

    Examples
    --------
    >>> from sheaflinalg.network.graph.nodes import Node
    >>> pool = Node("p", "maxpool", ["x"], {"kernel_size": 2**40, "stride": 1, "padding": 2**39, "dilation": 1})
    >>> check_node_table(pool, (1, 4))          # 5 windows of 2**40 taps
    Traceback (most recent call last):
    ...
    sheaflinalg._common.memory.InsufficientMemoryError: the window table of node 'p' (maxpool): about ...
    """
    if (shape is None) == (node.op in BUILT_BY_SHAPE_RULE):
        check_table(node_table_bytes(node, tuple(parent), shape), f"node {node.name!r} ({node.op})")
