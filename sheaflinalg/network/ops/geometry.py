"""Window geometry of the convolution and pooling ops: attributes checked, window tables built once per node.

Every sliding-window op (``conv``, ``avgpool``, ``maxpool``) reads its
spatial geometry ``(spatial, kernel, stride, padding, dilation)`` from here,
and its window table from :mod:`sheaflinalg.kernels.windows`, so the forward
pass, the transposes and the sparse restriction maps cannot disagree.

A window table is sized by its node's geometry, not by the batch (a max-pool over ``10**9``
positions, a kernel of ``2**40`` taps read from a 200-byte file, an adaptive pool to ``10**9``
outputs), so every table is estimated before it is built (:func:`check_table`): the shape rules
estimate their node's table, and a network that could not hold it is refused when it is made or
loaded, with :class:`~sheaflinalg._common.memory.InsufficientMemoryError` naming the node.
"""

import numbers

import numpy as np

from ..._common.memory import BATCH_FLOOR, check_memory
from ..._common.validation import as_int_tuple
from ...kernels.convolution import conv_geometry, table_geometry
from ...kernels.windows import adaptive_table_bytes, adaptive_windows, output_size, window_indices, window_table_bytes

WAY_OUT = ("use a smaller kernel, stride, padding or output size, or a smaller input (the table holds an "
           "int64 per output position and kernel offset)")


def check_table(node, n_bytes):
    """Refuse ``node`` if its window table of ``n_bytes`` (peak, while it is built) would not fit in memory.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> pool = sl.Node("p", "maxpool", ["x"], {"kernel_size": 2**40, "stride": 1, "padding": 2**39, "dilation": 1})
    >>> check_table(pool, window_table_bytes((4,), (2**40,), (1,), (2**39,), (1,)))
    Traceback (most recent call last):
    ...
    sheaflinalg._common.memory.InsufficientMemoryError: the window table of node 'p' (maxpool): about ...
    """
    if n_bytes >= BATCH_FLOOR:      # smaller tables are not worth reading /proc for
        check_memory(n_bytes, f"the window table of node {node.name!r} ({node.op})", WAY_OUT)


def window_table(node, window):
    """The window table ``(index, out_spatial)`` of ``window`` = ``(spatial, kernel, stride, padding, dilation)``,
    after its estimate."""
    check_table(node, window_table_bytes(*window))
    return window_indices(*window)


def ints(node, key, n_axes, minimum):
    """Attribute ``key`` of ``node`` as ``n_axes`` ints ``>= minimum`` (an int is repeated per axis)."""
    return as_int_tuple(node.attrs[key], n_axes, minimum, f"node {node.name!r} ({node.op}): {key}")


def check_groups(node, channels, which):
    """The node's ``groups``: a positive divisor of its ``channels`` (``which`` says of what: "output", "input")."""
    groups = node.attrs["groups"]
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1 or channels % groups:
        raise ValueError(f"node {node.name!r} ({node.op}): groups must be a positive divisor of the "
                         f"{channels} {which} channels, got {groups!r}")
    return int(groups)


def spatial_axes(node, parent, n_axes):
    """The spatial shape of a ``(channels, *spatial)`` parent with 1 or 2 spatial axes."""
    if n_axes not in (1, 2) or len(parent) != n_axes + 1:
        raise ValueError(f"node {node.name!r} ({node.op}) takes a (channels, {n_axes} spatial axes) input, "
                         f"got shape {parent}")
    return parent[1:]


def window_output(node, spatial, kernel, stride, padding, dilation, ceil_mode=False):
    """The spatial output shape of a window sweep; ValueError naming the node if no window fits."""
    out = tuple(output_size(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation))
    if min(out) < 1:
        raise ValueError(f"node {node.name!r} ({node.op}): its window (kernel {kernel}, dilation {dilation}, "
                         f"padding {padding}) does not fit the input of spatial shape {spatial}")
    return out


def conv_window(node, parent):
    """``(spatial, kernel, stride, padding, dilation)`` of a ``conv`` node on a parent of shape ``parent``."""
    W = node.params["weight"]
    n_axes = W.ndim - 2
    return (tuple(parent[1:]), tuple(W.shape[2:]), ints(node, "stride", n_axes, 1),
            ints(node, "padding", n_axes, 0), ints(node, "dilation", n_axes, 1))


def ceil_mode(node):
    """The ``ceil_mode`` attribute of a pooling node (False if absent: graph files written before it); a bool."""
    value = node.attrs.get("ceil_mode", False)
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"node {node.name!r} ({node.op}): ceil_mode must be a bool, got {value!r}")
    return bool(value)


def pool_window(node, parent):
    """``(spatial, kernel, stride, padding, dilation, ceil_mode)`` of an ``avgpool``/``maxpool`` node (checked).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> pool_window(sl.Node("p", "maxpool", ["x"], {"kernel_size": 3, "stride": 2, "padding": 0, "dilation": 1,
    ...                                             "ceil_mode": True}), (8, 6, 6))
    ((6, 6), (3, 3), (2, 2), (0, 0), (1, 1), True)
    """
    kernel = node.attrs["kernel_size"]
    n_axes = len(parent) - 1 if isinstance(kernel, numbers.Integral) else len(tuple(kernel))
    spatial = spatial_axes(node, parent, n_axes)
    kernel = ints(node, "kernel_size", n_axes, 1)
    stride = ints(node, "stride", n_axes, 1)
    padding = ints(node, "padding", n_axes, 0)
    dilation = ints(node, "dilation", n_axes, 1) if "dilation" in node.attrs else (1,) * n_axes
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"node {node.name!r} ({node.op}): padding {padding} must be at most half the kernel {kernel}")
    return spatial, kernel, stride, padding, dilation, ceil_mode(node)


def pool_shape(node, parent):
    """Output shape of an ``avgpool``/``maxpool`` node; ValueError if a window reads only padding."""
    window = spatial, kernel, stride, padding, dilation, _ = pool_window(node, parent)
    out = window_output(node, *window)
    index, _ = window_table(node, window)
    if np.any(np.all(index < 0, axis=1)):
        raise ValueError(f"node {node.name!r} ({node.op}): a window (kernel {kernel}, dilation {dilation}, padding "
                         f"{padding}) reads only padding on the input of spatial shape {spatial}")
    return (parent[0],) + out


def conv_geometry_of(node, graph):
    """The :class:`~sheaflinalg.kernels.convolution.ConvGeometry` of a ``conv`` node of ``graph``."""
    parent = graph.shapes[node.inputs[0]]
    spatial, kernel, stride, padding, dilation = window = conv_window(node, parent)
    check_table(node, window_table_bytes(*window))
    W = node.params["weight"]
    return conv_geometry(parent[0], spatial, W.shape[0], node.attrs["groups"], kernel, stride, padding, dilation)


def conv_transpose_geometry_of(node, graph):
    """The :class:`~sheaflinalg.kernels.convolution.ConvGeometry` of the convolution a ``conv_transpose`` node of
    ``graph`` is the adjoint of: from the node's output positions to its parent's, with the node's weight,
    stride, padding and dilation.  The windows past the parent's extent (there are some when the
    ``output_padding`` is at least the stride) are dropped: that convolution's map restricted to them.
    """
    parent, out = graph.shapes[node.inputs[0]], graph.shapes[node.name]
    index, full = window_table(node, conv_window(node, out))
    K = index.shape[1]
    kept = tuple(slice(0, n) for n in parent[1:])
    index = np.ascontiguousarray(index.reshape(full + (K,))[kept].reshape(-1, K))
    return table_geometry(index, out[0], parent[0], node.attrs["groups"], np.prod(out[1:]), np.prod(parent[1:]))


def pool_windows(node, graph):
    """``(channels, n_in_positions, index, None)`` of a sliding-window pool of ``graph`` (the last entry is
    the divisor of the pooling kernels' signature: an average pool fills it in, a max-pool has none)."""
    parent = graph.shapes[node.inputs[0]]
    index, _ = window_table(node, pool_window(node, parent))
    return parent[0], int(np.prod(parent[1:])), index, None


def padded_window_sizes(node, graph):
    """Every window's number of entries inside the padded input (PyTorch's ``count_include_pad`` divisor):
    the kernel's size, less what a ``ceil_mode`` window runs past the padded end.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> from sheaflinalg.network.graph import Graph
    >>> pool = sl.Node("p", "avgpool", ["x"], {"kernel_size": 3, "stride": 2, "padding": 1,
    ...                                        "count_include_pad": True, "ceil_mode": True})
    >>> padded_window_sizes(pool, Graph((1, 4), [pool])).tolist()   # windows [-1, 2), [1, 4), [3, 5) of [-1, 5)
    [3.0, 3.0, 2.0]
    """
    spatial, kernel, stride, padding, _, _ = pool_window(node, graph.shapes[node.inputs[0]])   # no dilation
    sizes = np.ones(1)
    for n, k, s, p, m in zip(spatial, kernel, stride, padding, graph.shapes[node.name][1:]):
        start = np.arange(m) * s - p
        sizes = np.outer(sizes, np.minimum(start + k, n + p) - start).ravel()
    return sizes


def adaptive_pool_windows(node, graph):
    """``(channels, n_in_positions, index, count)`` of an ``adaptive_avgpool`` node of ``graph``."""
    parent = graph.shapes[node.inputs[0]]
    check_table(node, adaptive_table_bytes(parent[1:], graph.shapes[node.name][1:]))
    index, count = adaptive_windows(parent[1:], graph.shapes[node.name][1:])
    return parent[0], int(np.prod(parent[1:])), index, count.astype(np.float64)


def window_reach(kernel):
    """How many windows' positions one input position can meet through two windows (Gram-block bandwidth)."""
    return int(np.prod([2 * k - 1 for k in kernel]))
