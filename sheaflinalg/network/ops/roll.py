"""``roll``: the entries shifted cyclically along per-sample axes (``torch.roll``; a Swin transformer's shifted
windows)."""

import numbers

import numpy as np

from .rule import Gather


def check_roll(node, parent):
    """``(shifts, axes)`` of ``node.attrs`` as tuples of ints, one shift per distinct per-sample axis."""
    shifts, axes = (node.attrs[k] for k in ("shifts", "axes"))
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
    axes = (axes,) if isinstance(axes, numbers.Integral) else tuple(axes)
    ints = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in shifts + axes)
    if not ints or len(shifts) != len(axes) or not axes or len(set(axes)) != len(axes) or \
            not all(0 <= a < len(parent) for a in axes):
        raise ValueError(f"node {node.name!r} (roll): shifts and axes must be as many integers, the axes distinct "
                         f"per-sample axes of {parent}, got shifts={node.attrs['shifts']!r}, "
                         f"axes={node.attrs['axes']!r}")
    return tuple(int(s) for s in shifts), tuple(int(a) for a in axes)


class Roll(Gather):
    """Output entry ``q`` takes the parent's ``q - shifts`` (modulo the axes' lengths): a permutation matrix.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> node = sl.Node("r", "roll", ["x"], {"shifts": (1,), "axes": (0,)})
    >>> RULE.shape(node, [(3, 2)])
    (3, 2)
    """

    name = "roll"
    attrs = ("shifts", "axes")

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        check_roll(node, parent)
        return parent

    def sources(self, node, graph):
        parent = graph.shapes[node.inputs[0]]
        shifts, axes = check_roll(node, parent)
        return np.roll(np.arange(int(np.prod(parent))).reshape(parent), shifts, axes).ravel()


RULE = Roll()
