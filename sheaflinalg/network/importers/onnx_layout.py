"""Where the samples of a batch sit in the values of an ONNX file, and the converters that move them.

torch.onnx writes ``nn.MultiheadAttention`` sequence-first, the batch merged with the heads (a value of
ONNX shape ``(batch * heads, sequence, d)``), and Swin's windows merged into the batch.  Every value computed
from the input has a :class:`~.batch_layout.Layout` (``reader.layouts``, the batch first and alone where
absent), shared with the ATen importer: the graph node holds each sample's own array
(:meth:`~.batch_layout.Layout.per_sample`).  ``Transpose`` moves the samples, the views (``Reshape``,
``Unsqueeze``, ``Squeeze``) and ``Gather`` of one index keep them where they are, and the ops of
:data:`MOVED` (elementwise ops, products, Softmax, Concat, Slice, Split, the reductions and the trailing
normalisations) act on each sample separately wherever it sits (their axes read through the layout, their
constants as one sample's).  Any other op reading a value whose samples are not the first axis alone is
refused, naming the node, as is an axis holding the samples (acting along it mixes them).
"""

import math
from types import SimpleNamespace

import numpy as np

from .. import ops
from .batch_layout import STANDARD, axis, constant_sample, from_flat, permuted, without
from .builder import refuse
from .onnx_activations import OPS as ACTIVATIONS
from .onnx_ops import BATCHES, int_input


def layout(reader, key):
    """The layout of the value ``key`` (:data:`~.batch_layout.STANDARD` unless a converter moved it)."""
    return reader.layouts.get(key, STANDARD)


def full_shape(reader, key, batch):
    """The ONNX shape of the value ``key`` at ``batch`` samples."""
    return layout(reader, key).full(reader.builder.shape(key), batch)


def _set(reader, key, new):
    """Record ``new`` as the layout of the value ``key`` (the standard one is the default, not stored)."""
    if new != STANDARD:
        reader.layouts[key] = new
    else:
        reader.layouts.pop(key, None)


def transpose(reader, node, label, attrs, rule):
    """``Transpose``: each sample's axes permuted, the samples' own axis moved with them."""
    source = node.input[0]
    rank = len(full_shape(reader, source, 1))
    perm = tuple(int(a) for a in attrs.get("perm", range(rank - 1, -1, -1)))
    if sorted(perm) != list(range(rank)):
        raise refuse(label, node.op_type, f"perm={list(perm)} is not a permutation of the {rank} axes")
    new, axes = permuted(layout(reader, source), perm)
    if axes == tuple(range(len(axes))):
        reader.builder.elide(node.output[0], source)
    else:
        reader.builder.add(node.output[0], label, rule.name, [source], {"axes": axes})
    _set(reader, node.output[0], new)


def _view(reader, node, label, targets):
    """``node``'s output: its input read as ONNX shape ``targets[batch]`` (same entries, same order) at each
    of :data:`~.onnx_ops.BATCHES`; refused where no one axis holds the samples the same way at both."""
    source = node.input[0]
    old, results = layout(reader, source), set()
    for b in BATCHES:
        A, K = old.flat(full_shape(reader, source, b))
        target = targets[b]
        new = from_flat(target, A, K, b) if min(target, default=1) >= 1 and math.prod(target) == A * b * K else None
        results.add(None if new is None else (new, new.per_sample(target)))
    new, per = results.pop() if len(results) == 1 and None not in results else (None, None)
    if new is None:
        raise refuse(label, node.op_type, f"the target shape {list(targets[BATCHES[0]])} (for a batch of "
                                          f"{BATCHES[0]}) does not keep the {math.prod(reader.builder.shape(source))} "
                                          "values of each sample together in one axis holding the samples")
    if per == reader.builder.shape(source):
        reader.builder.elide(node.output[0], source)
    else:
        reader.builder.add(node.output[0], label, ops.reshape.RULE.name, [source], {"shape": per})
    _set(reader, node.output[0], new)


def _reshape_target(full, target, allowzero):
    """ONNX's Reshape rule: ``target`` (0: the input's extent, -1: the rest) for an input of shape ``full``."""
    dims = [full[i] if n == 0 and not allowzero and i < len(full) else int(n) for i, n in enumerate(target)]
    if dims.count(-1) == 1:
        known = math.prod(n for n in dims if n != -1)
        dims[dims.index(-1)] = math.prod(full) // known if known and math.prod(full) % known == 0 else -2
    return tuple(dims)


def reshape(reader, node, label, attrs, rule):
    """``Reshape`` to a target of shape arithmetic or a constant (a fixed batch size written into its first
    entry is read as the batch)."""
    name = node.input[1]
    if name in reader.sizes:
        targets = {b: [int(n) for n in reader.sizes[name][b].reshape(-1)] for b in BATCHES}
    elif name in reader.constants:
        target = [int(n) for n in np.asarray(reader.constants[name]).reshape(-1)]
        fixed = bool(target) and reader.batch is not None and target[0] == reader.batch
        targets = {b: [b] + target[1:] if fixed else target for b in BATCHES}
    else:
        raise refuse(label, node.op_type, "its target shape is computed from values, not from shapes")
    _view(reader, node, label, {b: _reshape_target(full_shape(reader, node.input[0], b), targets[b],
                                                   attrs.get("allowzero", 0)) for b in BATCHES})


def _axes(reader, node, label, attrs):
    axes = attrs.get("axes", int_input(reader, node, label, 1, "axes"))
    return None if axes is None else [int(a) for a in axes]


def unsqueeze(reader, node, label, attrs, rule):
    """``Unsqueeze``: axes of extent 1 inserted (a view)."""
    axes = _axes(reader, node, label, attrs)
    targets = {}
    for b in BATCHES:
        shape = list(full_shape(reader, node.input[0], b))
        rank = len(shape) + len(axes)
        for a in sorted(a % rank for a in axes):
            shape.insert(a, 1)
        targets[b] = tuple(shape)
    _view(reader, node, label, targets)


def squeeze(reader, node, label, attrs, rule):
    """``Squeeze``: axes of extent 1 dropped (a view; without axes, every axis of extent 1)."""
    axes = _axes(reader, node, label, attrs)
    targets = {}
    for b in BATCHES:
        shape = full_shape(reader, node.input[0], b)
        dropped = {a % len(shape) for a in axes} if axes else {a for a, n in enumerate(shape) if n == 1}
        targets[b] = tuple(n for a, n in enumerate(shape) if a not in dropped)
    _view(reader, node, label, targets)


def gather(reader, node, label, attrs, rule):
    """``Gather`` of a value at one constant index (or a run of consecutive ones) along an axis not holding the
    samples: a slice (and, for a single index, that axis dropped)."""
    source, index = node.input
    if index not in reader.constants or not reader.builder.has(source):
        raise refuse(label, node.op_type, "only a value gathered at constant indices is supported")
    idx = np.asarray(reader.constants[index]).astype(np.int64)
    shape, old = reader.builder.shape(source), layout(reader, source)
    rank = len(old.full(shape, 1))
    a = int(attrs.get("axis", 0))
    per_axis = axis(old, label, node.op_type, a, rank)
    idx = np.where(idx < 0, idx + shape[per_axis], idx).reshape(-1)
    if idx.size == 0 or not np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)) or idx[-1] >= shape[per_axis]:
        raise refuse(label, node.op_type, f"indices {idx.tolist()} are not a run of consecutive entries of axis {a}")
    single = np.ndim(reader.constants[index]) == 0
    sliced = f"{node.output[0]}/slice" if single else node.output[0]
    reader.builder.add(sliced, label, rule.name, [source], {"axis": per_axis, "start": int(idx[0]),
                                                           "stop": int(idx[-1]) + 1, "step": 1})
    if single:
        per = shape[:per_axis] + shape[per_axis + 1:]
        reader.builder.add(node.output[0], label, ops.reshape.RULE.name, [sliced], {"shape": per})
    _set(reader, node.output[0], without(old, [a], rank) if single else old)


def _standard_constants(reader, node, label, like):
    """``node`` with its constant operands as one sample's arrays with a leading batch axis of 1 (scalars
    kept), read against the value ``like`` where its samples sit."""
    inputs = []
    for name in node.input:
        c = reader.constants.get(name)
        along_last = c is not None and all(n == 1 for n in np.shape(c)[:-1]) and \
            layout(reader, like).dim < len(full_shape(reader, like, 1)) - 1
        if c is not None and np.size(c) > 1 and not along_last:
            b = BATCHES[0]
            sample = constant_sample(label, node.op_type, reader.constants[name], full_shape(reader, like, b),
                                     layout(reader, like), b)
            name = f"{name}@{node.output[0]}"
            reader.constants[name] = sample[None]
        inputs.append(name)
    return SimpleNamespace(op_type=node.op_type, name=node.name, input=inputs, output=node.output,
                           attribute=node.attribute)


def _elementwise(reader, node, label, attrs, entry, values):
    """An op acting entry by entry (constants broadcast as one sample's): the usual converter, samples kept."""
    if len({layout(reader, v) for v in values}) != 1:
        raise refuse(label, node.op_type, "its operands hold the samples of the batch in different axes")
    entry.convert(reader, _standard_constants(reader, node, label, values[0]), label, attrs, entry.rule)
    _set(reader, node.output[0], layout(reader, values[0]))


def _last_axis(reader, node, label, attrs, entry, values):
    """``MatMul`` (by a constant, or of two values), ``Gemm`` and ``LpNormalization``: over the last axes, which
    must not hold the samples."""
    rank = len(full_shape(reader, values[0], 1))
    lowest = rank - (2 if len(values) == 2 else 1)
    if len({layout(reader, v) for v in values}) != 1 or len({len(full_shape(reader, v, 1)) for v in values}) != 1:
        raise refuse(label, node.op_type, "its operands hold the samples of the batch in different axes")
    if layout(reader, values[0]).dim >= lowest:
        raise refuse(label, node.op_type, f"axis {layout(reader, values[0]).dim} holds the samples of the batch, "
                                          "and the product acts along it (mixing them)")
    entry.convert(reader, node, label, attrs, entry.rule)
    _set(reader, node.output[0], layout(reader, values[0]))


def _softmax(reader, node, label, attrs, entry, values):
    """``Softmax`` over one axis not holding the samples."""
    x = values[0]
    rank = len(full_shape(reader, x, 1))
    per_axis = axis(layout(reader, x), label, node.op_type, int(attrs.get("axis", -1)), rank)
    causal = x in reader.causal
    if causal and per_axis != len(reader.builder.shape(x)) - 1:
        raise refuse(label, node.op_type, "a causal mask is supported on the last axis only")
    reader.builder.add(node.output[0], label, entry.rule.name, [x], {"axis": per_axis, "causal": causal})
    _set(reader, node.output[0], layout(reader, x))


def _along_axes(reader, node, label, attrs, entry, values):
    """``Concat``, ``Slice``, ``Split`` and ``ReduceMean``/``ReduceSum``: the usual converter, whose axes are read
    through the input's layout (refused for the samples' own); every output keeps the samples where they are,
    but for the reduced axes dropped (``keepdims=0``)."""
    old = layout(reader, values[0])
    if len({layout(reader, v) for v in values}) != 1:
        raise refuse(label, node.op_type, "its operands hold the samples of the batch in different axes")
    entry.convert(reader, node, label, attrs, entry.rule)
    new = old
    if node.op_type.startswith("Reduce") and not attrs.get("keepdims", 1):
        new = without(old, _axes(reader, node, label, attrs), len(full_shape(reader, values[0], 1)))
    for key in node.output:
        _set(reader, key, new)


def _trailing_norm(reader, node, label, attrs, entry, values):
    """``LayerNormalization``/``RMSNormalization`` over the axes from ``axis`` on, none of which may hold the samples."""
    rank = len(full_shape(reader, values[0], 1))
    first, held = int(attrs.get("axis", -1)), layout(reader, values[0]).dim
    if not -rank <= first < rank or held >= first % rank:
        raise refuse(label, node.op_type, f"axis={first} normalises the axes from it on of a rank-{rank} value, "
                                          f"axis {held} holding the samples of the batch among them (or is out of "
                                          "range); only axes after the samples' can be normalised")
    entry.convert(reader, node, label, dict(attrs, axis=first % rank - rank), entry.rule)
    _set(reader, node.output[0], layout(reader, values[0]))


#: ``{op_type: convert(reader, node, label, attrs, entry, values)}`` of the ops converted wherever the samples
#: of their operands (``values``: the inputs computed from the input) sit.
MOVED = {"Add": _elementwise, "Sub": _elementwise, "Mul": _elementwise, "Div": _elementwise,
         "Identity": _elementwise, "Dropout": _elementwise, "MatMul": _last_axis, "Gemm": _last_axis,
         "LpNormalization": _last_axis, "Concat": _along_axes, "Slice": _along_axes, "Split": _along_axes,
         "ReduceMean": _along_axes, "ReduceSum": _along_axes, "LayerNormalization": _trailing_norm,
         "RMSNormalization": _trailing_norm, "Softmax": _softmax, **{op: _elementwise for op in ACTIVATIONS}}
#: The converters that read the layouts themselves (whatever their input's).
VIEWS = {"Transpose": transpose, "Reshape": reshape, "Unsqueeze": unsqueeze, "Squeeze": squeeze, "Gather": gather}
#: The converters made of others (of their own nodes, each converted through :func:`convert`).
COMPOSITE = {"Einsum"}


def convert(reader, node, label, attrs, entry):
    """Convert ``node`` by ``entry``; where an operand's samples are not the first axis alone, through
    :data:`MOVED` (refused, naming the node, for any other op)."""
    values = [name for name in node.input if name and reader.builder.has(name)]
    moved = [layout(reader, v) for v in values if layout(reader, v) != STANDARD]
    shapes_only = entry.rule is None and node.op_type not in MOVED      # Shape (its arithmetic reads layouts)
    if not moved or shapes_only or entry.convert in VIEWS.values() or node.op_type in COMPOSITE:
        return entry.convert(reader, node, label, attrs, entry.rule)
    if node.op_type not in MOVED:
        raise refuse(label, node.op_type, f"its input holds the samples of the batch in axis {moved[0].dim} (moved "
                                          "there by a Transpose or Reshape); it is supported only with the batch "
                                          f"first and alone (wherever the samples sit: {', '.join(sorted(MOVED))})")
    return MOVED[node.op_type](reader, node, label, attrs, entry, values)
