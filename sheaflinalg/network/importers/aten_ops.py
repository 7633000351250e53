"""The torch.export importer's converters of ATen plumbing, arithmetic and matrix products.

A converter is ``convert(rule, program, node, name, op) -> Step`` (:class:`~.torch_modules.Step`): ``program``
(:class:`~.torch_export.Program`) gives the per-sample shapes, axes and constants, and where the converted
value keeps its samples (``program.layouts``: set here where an op moves them, else kept from the first
parent).  Views (``view``, ``squeeze``, ``unsqueeze``, ``clone``, ...) are reshapes of every sample's
value; ``permute`` a permutation of its axes; ``select``, ``slice`` and the pieces of ``split`` slices;
``add``, ``sub``, ``mul``, ``div`` with a constant an ``affine`` node, of two values ``add`` and ``mul``;
``linear``, ``addmm``, ``mm``, ``bmm``, ``matmul`` with a constant matrix ``linear`` (on the last axis),
of two values ``matmul``.  Dimensions are ATen's (the batch included), mapped to per-sample axes by the
value's layout.
"""

import numbers
import operator

import numpy as np

from .. import ops
from .batch_layout import permuted, without
from .builder import Inner, refuse
from .torch_modules import Step, reshape_step, slice_range


def _integer(name, op, value, what):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise refuse(name, op, f"its {what} {value!r} is not an integer")
    return int(value)


def view(rule, program, node, name, op):
    """``view``, ``_unsafe_view``, ``reshape``, ``squeeze``, ``unsqueeze``, ``flatten``, ``clone``, ``alias``,
    ``_to_copy``, ``expand`` keeping the shape: every sample's value reshaped (elided where it keeps it)."""
    parent = node.args[0]
    if op.startswith("aten.expand") and program.aten_shape(node) != program.aten_shape(parent):
        raise refuse(name, op, f"it broadcasts a value of shape {program.aten_shape(parent)} to "
                               f"{program.aten_shape(node)}; only constants are expanded")
    program.reshaped(node, parent, name, op)
    return reshape_step(rule, parent)


def permute(rule, program, node, name, op):
    """``permute``: the per-sample axes permuted as the ATen dims are (the batch's dim moves along)."""
    parent, dims = node.args[0], node.args[1]
    ndim = len(program.aten_shape(parent))
    layout, axes = permuted(program.layout(parent), [_integer(name, op, d, "dim") % ndim for d in dims])
    program.layouts[node] = layout
    if axes == tuple(range(len(axes))):
        return Step(None, [parent])
    return Step(rule, [parent], {"axes": axes})


def slice_tensor(rule, program, node, name, op):
    """``slice(x, dim, start, end, step)`` of a per-sample axis (elided where it keeps everything)."""
    args = list(node.args) + [None] * (5 - len(node.args))
    parent, dim, start, end, step = args[0], args[1] or 0, args[2], args[3], args[4] or 1
    shape = program.shape(parent)
    attrs = slice_range(name, op, shape, program.axis(parent, dim, name, op) + 1, start, end, step)
    if attrs["start"] == 0 and attrs["stop"] == shape[attrs["axis"]] and attrs["step"] == 1:
        return Step(None, [parent])
    return Step(rule, [parent], attrs)


def select(rule, program, node, name, op):
    """``select(x, dim, index)``: the slice of one entry of a per-sample axis, then that axis dropped."""
    parent, dim, index = node.args
    shape, ndim = program.shape(parent), len(program.aten_shape(parent))
    axis = program.axis(parent, dim, name, op)
    index = _integer(name, op, index, "index") % shape[axis]
    program.layouts[node] = without(program.layout(parent), [dim], ndim)
    piece = Inner(f"{node.name}.entry")
    inner = [(piece, "entry", Step(ops.slice.RULE, [parent], slice_range(name, op, shape, axis + 1, index,
                                                                         index + 1)))]
    return Step(ops.reshape.RULE, [piece], resolve=lambda fx, shape: {"shape": shape(node)}, inner=inner)


def split(rule, program, node, name, op):
    """``split_with_sizes``, ``split``: nothing of their own; each piece read (``getitem``) is a slice."""
    if any(user.target is not operator.getitem for user in node.users):
        raise refuse(name, op, "its pieces must be read one by one (a, b = x.split(...))")
    return Step(None, [])


def _pieces(program, source, name, op):
    """``(parent, per-sample axis, [(start, stop)])`` of a ``split_with_sizes``/``split`` node."""
    parent, size = source.args[0], source.args[1]
    dim = source.args[2] if len(source.args) > 2 else source.kwargs.get("dim", 0)
    axis = program.axis(parent, dim, name, op)
    length = program.shape(parent)[axis]
    sizes = [min(size, length - k) for k in range(0, length, size)] if isinstance(size, int) else list(size)
    ends = np.cumsum(sizes).tolist()
    return parent, axis, list(zip([0] + ends[:-1], ends))


#: ATen ops returning a tuple whose first entry is the value (the others: statistics, indices).
TUPLES = ("native_layer_norm", "native_group_norm", "_native_batch_norm_legit_no_training",
          "max_pool2d_with_indices")


def getitem(rule, program, node, name, op):
    """A piece of a ``split`` (a slice), or the value of an op returning it with its statistics or indices."""
    source, index = node.args
    kind = getattr(source.target, "__name__", "").split(".")[0]
    if kind in ("split_with_sizes", "split"):
        parent, axis, ranges = _pieces(program, source, name, op)
        program.layouts[node] = program.layout(parent)
        start, stop = ranges[index]
        return Step(rule, [parent], slice_range(name, op, program.shape(parent), axis + 1, start, stop))
    if kind in TUPLES and index == 0:
        program.layouts[node] = program.layout(source)
        return Step(None, [source])
    raise refuse(name, op, f"it reads entry {index} of {kind}'s results; only the value itself (entry 0) is "
                           "supported (not the statistics or indices)")


def cat(rule, program, node, name, op):
    """``cat(tensors, dim)``: a concatenation along a per-sample axis; a constant among the tensors (a class
    token) becomes a ``constant`` node."""
    tensors, dim = node.args[0], node.args[1] if len(node.args) > 1 else 0
    values = [t for t in tensors if program.is_value(t)]
    layouts = {program.layout(t) for t in values}
    if len(layouts) != 1:
        raise refuse(name, op, "its values hold the samples of the batch in different dims")
    program.layouts[node] = layouts.pop()
    axis = program.axis(values[0], dim, name, op)
    parents, inner = [], []
    for k, t in enumerate(tensors):
        if program.is_value(t):
            parents.append(t)
            continue
        key = Inner(f"{node.name}.fixed{k}")
        sample = program.sample(name, op, t, node, program.aten_shape(t))
        inner.append((key, f"fixed{k}", Step(ops.constant.RULE, [], params={"value": sample})))
        parents.append(key)
    return Step(rule, parents, {"axis": axis}, inner=inner)


def reduction(rule, program, node, name, op):
    """``mean.dim``, ``sum.dim_IntList``: a mean or sum over per-sample axes (not over the batch)."""
    parent, dims = node.args[0], node.args[1] if len(node.args) > 1 else None
    keepdim = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
    if not dims:
        raise refuse(name, op, "a reduction without dims reduces over the batch too; give the per-sample dims")
    dims = [dims] if isinstance(dims, int) else list(dims)
    axes = tuple(sorted({program.axis(parent, d, name, op) for d in dims}))
    ndim = len(program.aten_shape(parent))
    program.layouts[node] = program.layout(parent) if keepdim else without(program.layout(parent), dims, ndim)
    return Step(rule, [parent], {"axes": axes, "keepdim": keepdim})
