"""The torch.export importer's reading of ``F.normalize``: the decomposed pattern as one ``normalize`` node.

``F.normalize(x, p=2, dim=-1, eps)`` reaches the importer as four ATen calls:
``linalg_vector_norm(x, 2, [dim], True)``, ``clamp(norm, eps)`` (or ``clamp_min``), ``expand`` to ``x``'s
shape and ``div(x, denominator)``.  :func:`chain` recognises it from the ``div``; the norm, clamp and expand
of a chain are elided (nothing of their own) and the ``div`` becomes the ``normalize`` node of ``x``.  A
vector norm outside this pattern is refused; a clamp, expand or div outside it is read as usual.
"""

from typing import NamedTuple

from .. import ops
from .builder import Entry, refuse
from .torch_modules import Step


class Chain(NamedTuple):
    """An ``F.normalize`` pattern: its input ``x``, ATen ``dim``, ``eps`` and the elided nodes."""

    x: object
    dim: int
    eps: float
    interior: tuple


def _kind(node):
    return getattr(getattr(node, "target", None), "__name__", "").split(".")[0]


def _only_user(node, kind):
    """``node``'s one user if it is an ATen ``kind`` (a tuple of names), else None."""
    users = list(getattr(node, "users", ()))
    return users[0] if len(users) == 1 and _kind(users[0]) in kind else None


def chain(div):
    """The :class:`Chain` of ``div`` if it is ``x / expand(clamp(linalg_vector_norm(x, 2, [dim], True), eps))``
    (each inner value read only by the next), else None."""
    if _kind(div) != "div" or len(div.args) != 2 or div.kwargs.get("rounding_mode") is not None:
        return None
    x, node = div.args
    interior = []
    if _kind(node) == "expand":
        interior.append(node)
        node = node.args[0]
    if _kind(node) not in ("clamp", "clamp_min") or len(node.args) < 2 or node.args[2:] not in ((), (None,)):
        return None
    eps, norm = node.args[1], node.args[0]
    interior += [node, norm]
    args = list(norm.args) + [None] * 4 if _kind(norm) == "linalg_vector_norm" else [None] * 5
    if args[0] is not x or args[1] != 2 or not isinstance(args[2], (list, tuple)) or len(args[2]) != 1 \
            or args[3] is not True or norm.kwargs or any(len(n.users) != 1 for n in interior):
        return None
    return Chain(x, args[2][0], eps, tuple(interior))


def _downstream(node):
    """The :class:`Chain` that ``node`` (a norm, clamp or expand) is inside, else None."""
    for _ in range(3):
        node = _only_user(node, ("clamp", "clamp_min", "expand", "div"))
        if node is None or _kind(node) == "div":
            break
    found = chain(node) if node is not None else None
    return found


def vector_norm(rule, program, node, name, op):
    """``linalg_vector_norm``: nothing of its own inside ``F.normalize``'s pattern, else refused."""
    found = _downstream(node)
    if found is None or node not in found.interior:
        raise refuse(name, op, "a vector norm is supported only as F.normalize's denominator, x / "
                               "norm(x, 2, dim, keepdim=True).clamp_min(eps), read as one normalize node")
    program.layouts[node] = program.layout(found.x)
    return Step(None, [])


def normalize(rule, program, node, name, op, found):
    """The ``normalize`` node of a :class:`Chain` ending at the ``div`` ``node`` (over the last axis only)."""
    x = found.x
    axis = program.axis(x, found.dim, name, op)
    if axis != len(program.shape(x)) - 1:
        raise refuse(name, op, f"it normalises the per-sample axis {axis} of {program.shape(x)}; only the last "
                               "axis (F.normalize(x, dim=-1)) is supported")
    return Step(ops.normalize.RULE, [x], {"eps": float(found.eps)})


def or_normalize(entry):
    """``entry`` (a clamp, expand or div) with the nodes of an ``F.normalize`` pattern read as the pattern."""
    def convert(rule, program, node, name, op):
        if _kind(node) == "div" and chain(node) is not None:
            return normalize(rule, program, node, name, op, chain(node))
        found = None if _kind(node) == "div" else _downstream(node)
        if found is not None and node in found.interior:
            program.layouts[node] = program.layout(found.x)
            return Step(None, [])
        return entry.convert(rule, program, node, name, op)
    return Entry(entry.rule, convert)


#: The ATen table's entries of the pattern (:mod:`.aten_table` wraps its clamp, expand and div).
VECTOR_NORM = Entry(ops.normalize.RULE, vector_norm)
