"""``maxpool``: the maximum of every window; piecewise linear, its pattern the argmax of each window.

The selected entry is the first maximum in the window's C order (the lowest flat
input position), which is what PyTorch selects; a tie is a point where several
selections agree on the value.
"""

from types import MappingProxyType

import numpy as np
import scipy.sparse as sp

from ...kernels.pooling import decided_max_pool, max_pool, max_pool_transpose
from .geometry import pool_shape, pool_window, pool_windows, window_reach
from .rule import SELECTION, OpRule, entries_touched, parameterless


def selection_matrix(argmax, n_in):
    """The selection of one sample: row ``o`` picks input ``argmax[o]`` (CSR ``(n_out, n_in)``)."""
    n_out = argmax.size
    return sp.csr_matrix((np.ones(n_out), argmax.astype(np.int64), np.arange(n_out + 1)), shape=(n_out, n_in))


class MaxPool(OpRule):
    """A sliding-window maximum (kernel, stride, padding, dilation, ``ceil_mode``), one selection per output.

    With ``ceil_mode`` a last window may run past the end (PyTorch's rule, ``kernels.windows.output_size``):
    it selects among the input entries it covers.
    """

    name = "maxpool"
    attrs = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
    optional = MappingProxyType({"ceil_mode": False})
    pattern = SELECTION
    velocity = staticmethod(parameterless)
    work = staticmethod(entries_touched)

    def shape(self, node, parent_shapes):
        return pool_shape(node, parent_shapes[0])

    def windows(self, node, graph):
        """``(channels, n_in_positions, index, None)`` of the node's windows."""
        return pool_windows(node, graph)

    def window(self, node, parent_shape):
        """``(spatial, kernel, stride, padding, dilation, ceil_mode)`` of the node's windows on its parent."""
        return pool_window(node, parent_shape)

    def forward(self, node, graph):
        channels, n_in, index, _ = self.windows(node, graph)

        def step(inputs, out, pattern, frozen):
            (z,) = inputs
            if not frozen:
                max_pool(z, channels, n_in, index, out=out, argmax=pattern)
                return None
            best, _ = max_pool(z, channels, n_in, index)
            out[...] = np.take_along_axis(z, pattern, axis=1)
            return np.all(out == best, axis=1)
        return step

    def blocks(self, node, graph, pattern=None):
        return [selection_matrix(pattern, graph.sizes[node.inputs[0]])]

    def maps(self, node, graph):
        n_parent = graph.sizes[node.inputs[0]]
        return ((lambda i, x, p: np.take_along_axis(x, p, axis=1)),
                (lambda i, y, p: max_pool_transpose(y, p, n_parent)))

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        # one 1 per row: ||S||_2^2 is at most the largest number of windows containing one parent entry
        _, n_in, index, _ = self.windows(node, graph)
        return float(np.sqrt(np.bincount(index[index >= 0], minlength=n_in).max()))

    def nnz(self, node, graph):
        n, n_in = graph.sizes[node.name], graph.sizes[node.inputs[0]]
        kernel = pool_window(node, graph.shapes[node.inputs[0]])[1]
        return n * int(np.prod(kernel)), n_in * window_reach(kernel)

    def read_pattern(self, node, graph, z, previous=None, rtol=1e-12):
        """The first maximum of every window of ``z``; with ``previous``, a selection that is still a maximum
        up to ``rtol`` times the sample's largest ``|z|`` is kept (ties a solve resolves by rounding noise)."""
        channels, n_in, index, _ = self.windows(node, graph)
        best, argmax = max_pool(z, channels, n_in, index)
        if previous is not None:
            scale = rtol * np.maximum(1.0, np.abs(z).max(axis=1, keepdims=True))
            kept = np.take_along_axis(z, previous, axis=1) >= best - scale
            argmax = np.where(kept, previous, argmax)
        return argmax

    def read_decided(self, node, graph, z, forward, previous, rtol=1e-12, tie_rtol=1e-12):
        """:meth:`read_pattern` of ``z`` with ``previous``, then the windows tied at the ``forward`` values (up to
        ``tie_rtol``) that ``z`` left on a lower entry given back to ``previous`` (the tie decided by the selection
        solved under, :func:`~sheaflinalg.sheaf.matrix_free.switching.read_pattern`), in one compiled pass."""
        _, _, index, _ = self.windows(node, graph)
        return decided_max_pool(z, forward, previous, index, rtol, tie_rtol)

    def selected(self, node, graph, rows):
        """The parent's entries that some window selects, ``(n_samples, parent size)`` bool."""
        mask = np.zeros((rows.shape[0], graph.sizes[node.inputs[0]]), dtype=bool)
        np.put_along_axis(mask, rows, True, axis=1)
        return mask

    def check_pattern(self, node, graph, rows, what):
        """``rows`` (``(n_samples, size)``) as int64 argmax positions, each inside its own output's window."""
        if rows.dtype.kind not in "iu":
            raise ValueError(f"{what} must hold integer argmax positions in the parent's stalk, got dtype {rows.dtype}")
        rows = rows.astype(np.int64)
        channels, n_in, index, _ = self.windows(node, graph)
        n, n_out = rows.shape[1], index.shape[0]
        channel = np.arange(n) // n_out                     # output o = channel * n_out + position
        pos = index[np.arange(n) % n_out]                   # (n, K) window of every output, -1 in the padding
        inside = np.zeros(rows.shape, dtype=bool)
        for q in range(index.shape[1]):
            inside |= (pos[None, :, q] >= 0) & (rows == channel * n_in + pos[None, :, q])
        if not inside.all():
            s, o = np.argwhere(~inside)[0]
            raise ValueError(f"{what}: entry {o} of sample {s} is {rows[s, o]}, not a position inside its window "
                             f"(output {o} of channel {channel[o]} reads "
                             f"{(channel[o] * n_in + pos[o][pos[o] >= 0]).tolist()})")
        return np.ascontiguousarray(rows)

    def split_edge(self, node):
        """The edge whose residuals the selection splits: the parent's (selected, unselected entries)."""
        return node.inputs[0]


RULE = MaxPool()
