"""``slice``: a range ``start:stop:step`` of one per-sample axis (``narrow``, ``chunk``, ``split``, ``x[:, a:b]``,
ONNX ``Slice``)."""

import numbers

import numpy as np

from .rule import Gather


def check_range(node, parent):
    """``(axis, start, stop, step)`` of ``node.attrs``, checked: ``0 <= start < stop <= parent[axis]``,
    ``step >= 1``."""
    values = [node.attrs[k] for k in ("axis", "start", "stop", "step")]
    ok = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values)
    if not ok or not 0 <= values[0] < len(parent) or not 0 <= values[1] < values[2] <= parent[values[0]] \
            or values[3] < 1:
        raise ValueError(f"node {node.name!r} (slice): axis, start, stop, step must be integers with axis a "
                         f"per-sample axis of {parent}, 0 <= start < stop <= its length and step >= 1, got "
                         f"{dict(zip(('axis', 'start', 'stop', 'step'), values))}")
    return tuple(int(v) for v in values)


def sources(node, graph):
    """For every output entry, the position of the parent entry it takes."""
    parent = graph.shapes[node.inputs[0]]
    axis, start, stop, step = check_range(node, parent)
    index = tuple(slice(start, stop, step) if a == axis else slice(None) for a in range(len(parent)))
    return np.arange(int(np.prod(parent))).reshape(parent)[index].ravel()


class Slice(Gather):
    """The entries ``start:stop:step`` of one axis: the restriction map is a selection of rows of the identity.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("s", "slice", ["x"], {"axis": 0, "start": 2, "stop": 6, "step": 2}), [(8, 3)])
    (2, 3)
    """

    name = "slice"
    attrs = ("axis", "start", "stop", "step")

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        axis, start, stop, step = check_range(node, parent)
        return tuple(len(range(start, stop, step)) if a == axis else n for a, n in enumerate(parent))

    def sources(self, node, graph):
        return sources(node, graph)


RULE = Slice()
