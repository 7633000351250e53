"""Window tables built only after their memory estimate: the checked builders of every call site.

A window table (:mod:`sheaflinalg.kernels.windows`) is sized by its node's geometry, not by the
batch: a max-pool over an input of ``10**9`` positions, a kernel of ``2**40`` taps read from a
200-byte file, or an adaptive pool to ``10**9`` outputs would end in numpy's ``MemoryError`` (or
swap).  :func:`window_table` and :func:`adaptive_table` estimate the table's bytes first and refuse
one that would not fit with :class:`~sheaflinalg._common.memory.InsufficientMemoryError`.  (The
kernels layer cannot import ``_common``, so the check sits here, one layer up; this module imports
nothing of the graph, so that every module of it may use the builders.)
"""

from .._common.memory import BATCH_FLOOR, check_memory
from ..kernels.windows import adaptive_table_bytes, adaptive_windows, window_indices, window_table_bytes

WAY_OUT = ("use a smaller kernel, stride, padding or output size, or a smaller input (the table holds an "
           "int64 per output position and kernel offset)")


def check_table(n_bytes, what):
    """Refuse a window table of ``n_bytes`` (peak, while it is built) that would not fit in memory;
    ``what`` names its node (``"node 'pool1' (maxpool)"``).  Tables under 64 MiB are not checked."""
    if n_bytes >= BATCH_FLOOR:      # smaller tables are not worth reading /proc for
        check_memory(n_bytes, f"the window table of {what}", WAY_OUT)


def window_table(spatial, kernel, stride, padding, dilation, what="a window sweep"):
    """:func:`~sheaflinalg.kernels.windows.window_indices` after its memory estimate (``what`` as in
    :func:`check_table`).

    Examples
    --------
    >>> index, out = window_table((4,), (2,), (2,), (0,), (1,))
    >>> index.tolist(), out
    ([[0, 1], [2, 3]], (2,))
    """
    check_table(window_table_bytes(spatial, kernel, stride, padding, dilation), what)
    return window_indices(spatial, kernel, stride, padding, dilation)


def adaptive_table(in_spatial, out_spatial, what="an adaptive pool"):
    """:func:`~sheaflinalg.kernels.windows.adaptive_windows` after its memory estimate.

    Examples
    --------
    >>> index, count = adaptive_table((5,), (2,))
    >>> index.tolist(), count.tolist()
    ([[0, 1, 2], [2, 3, 4]], [3, 3])
    """
    check_table(adaptive_table_bytes(in_spatial, out_spatial), what)
    return adaptive_windows(in_spatial, out_spatial)
