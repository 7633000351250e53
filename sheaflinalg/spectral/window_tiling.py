"""Windows of a graph network's free coordinates around spatial positions, and tilings of them.

The input's spatial extent is cut into cells of ``level`` input pixels per axis.  A node whose shape
is ``(channels, *spatial)`` with as many spatial axes as the input, and whose pixels span at most
``level`` input pixels (its stride) and more than ``finest`` (default ``level / 2``), puts each of its
pixels, all channels, into the cell that holds the pixel's centre mapped to the input frame.  Other
nodes (flat ones, coarse ones, fine ones) are in no cell.

A tiling of period ``P`` and offset ``o`` keeps the cells whose index is ``o`` modulo ``P`` on every
axis; each kept cell is one window.  The ``P ** d`` offsets put every cell into exactly one tiling.
Whether the windows of a tiling are separated (no entry of ``L`` between two of them) is decided by
the caller with products (:mod:`sheaflinalg.spectral.windowed`): the geometry only proposes.
"""

from dataclasses import dataclass
import itertools

import numpy as np

from .._common.threads import blas_limit
from ..network.ops.linear import spectral_norm


@dataclass
class Cells:
    """The free coordinates that lie in a cell, and their cells.

    Attributes
    ----------
    coords : ndarray of int64, shape (n,)
        Free coordinates (ascending).
    cell : ndarray of int64, shape (n, d)
        Cell index of each coordinate on each spatial axis.
    counts : tuple of int
        Number of cells per axis.
    level : int
        Cell side in input pixels.
    """

    coords: np.ndarray
    cell: np.ndarray
    counts: tuple
    level: int


@dataclass
class Tiling:
    """The windows of one tiling: coordinates, the window of each, how many windows.

    Attributes
    ----------
    coords : ndarray of int64, shape (n,)
        Free coordinates in a window (ascending).
    window : ndarray of int64, shape (n,)
        Window number of each coordinate, ``0 .. count - 1``.
    count : int
    parity : ndarray of int64, shape (count,)
        Colour of each window: its lattice index modulo 2 on every axis, as one number.  Windows that
        are lattice neighbours (diagonals included) have different colours.
    """

    coords: np.ndarray
    window: np.ndarray
    count: int
    parity: np.ndarray


def node_strides(graph):
    """``{node: pixel size per axis in input pixels}`` of the nodes laid out like the input.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 2, "padding": 1, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 3, 3)), "bias": np.zeros(2)})
    >>> node_strides(sl.Network.from_nodes((1, 8, 8), [conv]).graph)
    {'c': (2.0, 2.0)}
    """
    spatial = graph.input_shape[1:]
    out = {}
    for node in graph.nodes:
        shape = graph.shapes[node.name]
        if len(spatial) and len(shape) == len(spatial) + 1:
            out[node.name] = tuple(s / n for s, n in zip(spatial, shape[1:]))
    return out


def window_level(graph):
    """The default cell side: the stride of the node whose map is largest, or None (no such node).

    A mode at the top of ``L`` that lives on one pixel sits on a map with a large norm at that
    pixel: the largest of ``||W||_2`` (a weight reshaped to ``(out, -1)``) and ``max |scale|`` over the
    nodes laid out like the input picks the stride whose pixels the windows should hold (ResNet-50:
    ``layer2.1.conv1``, stride 8).  A heuristic: the cross-check of :mod:`~sheaflinalg.spectral.windowed`
    catches a wrong level whose modes lie clearly below the top.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> pool = sl.Node("p", "avgpool", ["x"], {"kernel_size": 4, "stride": 4, "padding": 0, "count_include_pad": True,
    ...                                      "ceil_mode": False})
    >>> fc = sl.Node("c", "conv", ["p"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    ...              {"weight": 3 * np.ones((1, 1, 1)), "bias": np.zeros(1)})
    >>> window_level(sl.Network.from_nodes((1, 16), [pool, fc]).graph)
    4
    """
    strides = node_strides(graph)
    best, level = -1.0, None
    with blas_limit(1):         # small SVDs: more threads only spin (tens of seconds on a busy machine)
        for node in graph.nodes:
            level, best = _larger(node, strides, level, best)
    return level


def _larger(node, strides, level, best):
    """``(level, norm)`` of ``node`` when its map's norm is above ``best``, else ``(level, best)``."""
    if node.name in strides:
        for key in ("weight", "scale"):
            W = node.params.get(key)
            if W is None:
                continue
            norm = spectral_norm(W.reshape(W.shape[0], -1)) if W.ndim > 1 else float(np.max(np.abs(W)))
            if norm > best:
                best, level = norm, max(1, int(np.ceil(max(strides[node.name]))))
    return level, best


def cells(graph, layout, level, finest=None):
    """:class:`Cells` of a graph network's free coordinates for cells of ``level`` input pixels.

    Parameters
    ----------
    graph : Graph
    layout : Layout
        Its layout (free blocks named as the nodes).
    level : int
        Cell side in input pixels (at least 1).
    finest : float, optional
        Only nodes whose pixels span more than this (default ``level / 2``: the nodes of the level's
        stride; finer nodes hold little of a mode that lives on the level's pixels, and leaving them
        out lets a product skip them, :meth:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary.support`).
    """
    finest = level / 2 if finest is None else finest
    spatial = graph.input_shape[1:]
    strides = node_strides(graph)
    coords, cell = [], []
    for block in layout.free_blocks:
        stride = strides.get(block.name)
        if stride is None or not finest < max(stride) <= level:
            continue
        shape = graph.shapes[block.name]
        index = np.arange(block.size, dtype=np.int64).reshape(shape)
        grids = np.meshgrid(*[np.floor((np.arange(n) + 0.5) * s / level).astype(np.int64)
                              for n, s in zip(shape[1:], stride)], indexing="ij")
        coords.append(block.offset + index.reshape(-1))
        cell.append(np.stack([np.broadcast_to(g, shape).reshape(-1) for g in grids], axis=1))
    d = len(spatial)
    if not coords:
        return Cells(np.zeros(0, np.int64), np.zeros((0, d), np.int64), tuple(0 for _ in spatial), level)
    counts = tuple(-(-s // level) for s in spatial)
    return Cells(np.concatenate(coords), np.concatenate(cell), counts, level)


def tilings(cells, period):
    """The ``period ** d`` tilings of ``cells`` (:class:`Tiling`), offsets in C order; empty ones left out."""
    lattice = [-(-n // period) for n in cells.counts]
    out = []
    for offset in itertools.product(range(period), repeat=len(cells.counts)):
        keep = np.all(cells.cell % period == np.array(offset, dtype=np.int64), axis=1)
        if not np.any(keep):
            continue
        index = cells.cell[keep] // period
        number = np.ravel_multi_index(tuple(index.T), lattice)
        used, window = np.unique(number, return_inverse=True)
        multi = np.stack(np.unravel_index(used, lattice), axis=1)
        parity = (multi % 2) @ (2 ** np.arange(len(lattice), dtype=np.int64))
        out.append(Tiling(cells.coords[keep], window.reshape(-1), int(used.size), parity))
    return out
