"""The ONNX importer's shape arithmetic: nodes computing sizes and constants from shapes, evaluated at two batches.

torch.onnx writes ``x.size(0)``, ``flatten(2)``, ``view(n, t, h, d)``, a chunk's bounds, attention's scale
``1 / sqrt(d)``, its causal mask and Swin's padding to whole windows (``(w - W % w) % w``, F.pad's pads
reordered) as nodes reading ``Shape``: Shape, Gather, Slice, Unsqueeze, Squeeze, Concat, Cast, Identity, the
arithmetic (Add, Sub, Mul, Div, Mod, Sqrt), Equal, Where, Reshape, Transpose, ConstantOfShape, Expand,
Trilu, Range, ScatterND and Not (Swin's shifted windows' mask).  A value whose samples the exporter moved
(:mod:`.onnx_layout`) has the shape its layout gives.  :func:`is_size` says which nodes compute such values;
:func:`evaluate` evaluates one at every batch size of :data:`.onnx_ops.BATCHES` into ``reader.sizes``
(integers stay int64, a value cast to a floating type is float64).  A floating-point value equal at every
batch (the scale, the mask) is also a constant of the file (``reader.constants``), read by the converters
as any initializer.
"""

import numpy as np

from .batch_layout import STANDARD
from .builder import refuse
from .onnx_data import tensor_array
from .onnx_ops import BATCHES

#: ONNX's floating-point TensorProto types (FLOAT, FLOAT16, DOUBLE, BFLOAT16): a Cast to one gives float64.
FLOAT_TYPES = (1, 10, 11, 16)
#: The operations of shape arithmetic (a node is one only where it reads sizes and constants alone).
SIZE_OPS = ("Shape", "Gather", "Slice", "Unsqueeze", "Squeeze", "Concat", "Cast", "Identity", "Mul", "Div", "Add",
            "Sub", "Sqrt", "Mod", "ConstantOfShape", "Equal", "Where", "Reshape", "Expand", "Trilu", "Transpose",
            "Range", "ScatterND", "Not")


def _axes(reader, node, attrs):
    if "axes" in attrs:
        return tuple(int(a) for a in attrs["axes"])
    if len(node.input) > 1 and node.input[1]:
        return tuple(int(a) for a in np.asarray(reader.constants[node.input[1]]).reshape(-1))
    return None


def _slice(args, attrs):
    """Slice of a size array: starts, ends, axes and steps as inputs (``None`` if absent) or, before opset 10,
    attributes."""
    if "starts" in attrs:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends, axes, steps = ((args[1:] + [None] * 4)[:4])
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * args[0].ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return args[0][tuple(index)]


def _trilu(args, attrs):
    k = int(np.asarray(args[1]).reshape(-1)[0]) if len(args) > 1 and args[1] is not None else 0
    return np.triu(args[0], k) if attrs.get("upper", 1) else np.tril(args[0], k)


def _scatter_nd(args, attrs):
    """ScatterND without reduction: ``data`` with the entries (or slices) at ``indices`` replaced by ``updates``."""
    data, indices, updates = (np.asarray(a) for a in args[:3])
    reduction = attrs.get("reduction", b"none")
    if (reduction.decode() if isinstance(reduction, bytes) else reduction) != "none":
        raise ValueError(f"reduction={reduction!r}; only 'none' is supported")
    out, k = data.copy(), indices.shape[-1]
    for index, update in zip(indices.reshape(-1, k), updates.reshape((-1,) + data.shape[k:])):
        out[tuple(index)] = update
    return out


def _divide(a, b):
    """Div: integer division of integers (sizes are positive), true division of floating-point values."""
    integers = np.asarray(a).dtype.kind in "iub" and np.asarray(b).dtype.kind in "iub"
    return np.floor_divide(a, b) if integers else np.true_divide(a, b)


def _cast(a, attrs):
    return np.asarray(a, dtype=np.float64 if attrs.get("to") in FLOAT_TYPES else np.int64)


_PLAIN = {"Identity": lambda a: a, "Mul": np.multiply, "Div": _divide, "Add": np.add, "Sub": np.subtract,
          "Sqrt": np.sqrt, "Equal": np.equal, "Not": np.logical_not, "Where": np.where,
          "Reshape": lambda a, s: a.reshape(tuple(s)),
          "Expand": lambda a, s: np.broadcast_to(a, np.broadcast_shapes(np.shape(a), tuple(s))),
          "Range": lambda start, limit, delta: np.arange(start.item(), limit.item(), delta.item())}


def _value(reader, node, attrs, batch):
    """One shape-arithmetic node evaluated for a batch of ``batch`` samples."""
    def value(name):
        return reader.sizes[name][batch] if name in reader.sizes else np.asarray(reader.constants[name])
    if node.op_type == "Shape":
        source = node.input[0]
        full = np.array(value(source).shape if source in reader.sizes else
                        reader.layouts.get(source, STANDARD).full(reader.builder.shape(source), batch), dtype=np.int64)
        return full[attrs.get("start", 0):attrs.get("end", len(full))]
    args = [value(name) if name else None for name in node.input]
    if node.op_type == "Gather":
        return np.take(args[0], args[1], axis=attrs.get("axis", 0))
    if node.op_type in ("Unsqueeze", "Squeeze"):
        how = np.expand_dims if node.op_type == "Unsqueeze" else np.squeeze
        return how(args[0], _axes(reader, node, attrs))
    if node.op_type == "Concat":
        return np.concatenate([np.atleast_1d(a) for a in args], axis=attrs["axis"])
    if node.op_type == "ConstantOfShape":     # a tensor of sizes (torch's expand(n, -1, -1) resolving its -1s)
        fill = tensor_array(reader.onnx, reader.helper, attrs["value"]) if "value" in attrs else np.zeros(1)
        return np.full(tuple(args[0]), fill.reshape(-1)[0])
    special = {"Slice": _slice, "Trilu": _trilu, "ScatterND": _scatter_nd,
               "Cast": lambda args, attrs: _cast(args[0], attrs),
               "Mod": lambda args, attrs: (np.fmod if attrs.get("fmod", 0) else np.mod)(*args),
               "Transpose": lambda args, attrs: np.transpose(args[0], attrs.get("perm"))}
    if node.op_type in special:
        return special[node.op_type](args, attrs)
    return _PLAIN[node.op_type](*[a for a in args if a is not None])


def _batch_free(reader, name):
    return name in reader.sizes and len({v.tobytes() + bytes(v.shape) for v in reader.sizes[name].values()}) == 1


def is_size(reader, node):
    """Whether ``node`` computes sizes (``x.size(0)`` exported as Shape, Gather, Unsqueeze, Concat, ...): it reads
    sizes and constants only.  An Expand of a constant to a shape depending on the batch is not one: a class
    token made as large as the batch (:func:`.onnx_affine.expand`)."""
    if node.op_type == "Shape":
        return True
    names = [name for name in node.input if name]
    if node.op_type == "Expand" and names[0] not in reader.sizes and not _batch_free(reader, names[1]):
        return False
    return (node.op_type in SIZE_OPS and any(name in reader.sizes for name in names)
            and all(name in reader.sizes or name in reader.constants for name in names))


def evaluate(reader, node, label, attrs, rule):
    """Evaluate the shape-arithmetic ``node`` at every batch size; a floating-point result equal at every batch
    is a constant too."""
    try:
        values = {b: np.asarray(_value(reader, node, attrs, b)) for b in BATCHES}
    except (ValueError, IndexError, TypeError, KeyError, np.exceptions.AxisError) as exc:
        raise refuse(label, node.op_type, f"its size arithmetic cannot be evaluated ({exc})") from None
    out = node.output[0]
    reader.sizes[out] = {b: v.astype(np.float64 if v.dtype.kind == "f" else np.int64) for b, v in values.items()}
    if reader.sizes[out][BATCHES[0]].dtype.kind == "f" and _batch_free(reader, out):
        reader.constants[out] = reader.sizes[out][BATCHES[0]]
