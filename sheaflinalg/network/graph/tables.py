"""Window tables of a graph's convolution and pooling nodes, estimated before they are built.

A window table (:mod:`sheaflinalg.kernels.windows`) is sized by its node's geometry, not by the
batch: a max-pool over an input of ``10**9`` positions, a kernel of ``2**40`` taps read from a
200-byte file, or an adaptive pool to ``10**9`` outputs would end in numpy's ``MemoryError`` (or
swap).  Here the table's bytes are estimated first and a table that would not fit is refused with
:class:`~sheaflinalg._common.memory.InsufficientMemoryError`: :func:`check_node_table` while a
:class:`~sheaflinalg.network.graph.graph.Graph` is built (so a network whose tables cannot fit is
refused when it is made or loaded), and the checked builders :func:`window_table` and
:func:`adaptive_table` wherever a table is built.  (The kernels layer cannot import ``_common``,
so the check sits here, one layer up.)
"""

from ..._common.memory import BATCH_FLOOR, check_memory
from ...kernels.windows import adaptive_table_bytes, adaptive_windows, window_indices, window_table_bytes
from .nodes import window_geometry

WAY_OUT = ("use a smaller kernel, stride, padding or output size, or a smaller input (the table holds an "
           "int64 per output position and kernel offset)")
#: Nodes whose shape rule builds their window table (it checks that no window reads only padding).
BUILT_BY_SHAPE_RULE = ("avgpool", "maxpool")


def _check(n_bytes, what):
    if n_bytes >= BATCH_FLOOR:      # smaller tables are not worth reading /proc for
        check_memory(n_bytes, f"the window table of {what}", WAY_OUT)


def window_table(spatial, kernel, stride, padding, dilation, what="a window sweep"):
    """:func:`~sheaflinalg.kernels.windows.window_indices` after its memory estimate (``what``: named
    in the error, e.g. ``"node 'pool1' (maxpool)"``).

    Examples
    --------
    >>> index, out = window_table((4,), (2,), (2,), (0,), (1,))
    >>> index.tolist(), out
    ([[0, 1], [2, 3]], (2,))
    """
    _check(window_table_bytes(spatial, kernel, stride, padding, dilation), what)
    return window_indices(spatial, kernel, stride, padding, dilation)


def adaptive_table(in_spatial, out_spatial, what="an adaptive pool"):
    """:func:`~sheaflinalg.kernels.windows.adaptive_windows` after its memory estimate.

    Examples
    --------
    >>> index, count = adaptive_table((5,), (2,))
    >>> index.tolist(), count.tolist()
    ([[0, 1, 2], [2, 3, 4]], [3, 3])
    """
    _check(adaptive_table_bytes(in_spatial, out_spatial), what)
    return adaptive_windows(in_spatial, out_spatial)


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
        _check(node_table_bytes(node, tuple(parent), shape), f"node {node.name!r} ({node.op})")
