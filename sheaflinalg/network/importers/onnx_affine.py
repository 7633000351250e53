"""The ONNX importer's converters of values combined with constant initializers: ``Gemm``, ``MatMul`` by a
constant matrix (on the last axis of any value) and the bias ``Add`` folded into it, ``Add``, ``Sub``,
``Mul`` and ``Div`` with a constant operand (an elementwise affine map, the constant broadcast), and a
constant ``Expand``-ed or ``Tile``-d over the batch (a class token).

Each converter is ``convert(reader, node, label, attrs, rule)`` as in :mod:`.onnx_graph`'s table, which
hands it the rule of the op it makes (a sum with a constant operand is handed the affine rule too).
"""

import numpy as np

from .builder import affine_params, per_sample, refuse


def _linear(reader, node, label, rule, weight, bias):
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], params={"weight": weight, "bias": bias})


def gemm(reader, node, label, attrs, rule):
    """``Gemm``: ``alpha A B' + beta C`` with constant ``B`` and ``C`` (``A`` not transposed)."""
    if attrs.get("transA", 0):
        raise refuse(label, node.op_type, "transA=1 (the input transposed) is not supported")
    B = reader.constant(node, node.input[1], label, "matrix B")
    W = (B if attrs.get("transB", 0) else B.T) * float(attrs.get("alpha", 1.0))
    bias = np.zeros(W.shape[0])
    if len(node.input) > 2 and node.input[2]:
        C = reader.constant(node, node.input[2], label, "bias C") * float(attrs.get("beta", 1.0))
        try:
            bias = np.broadcast_to(C.reshape(-1) if C.size == W.shape[0] else C, (W.shape[0],)).copy()
        except ValueError:
            raise refuse(label, node.op_type, f"its bias C of shape {C.shape} is not one value per output") from None
    _linear(reader, node, label, rule, W, bias)


def matmul(reader, node, label, attrs, rule):
    """``MatMul`` of a value by a constant 2-D matrix ``B``: a linear map of the value's last axis."""
    B = reader.constant(node, node.input[1], label, "matrix B")
    if B.ndim != 2:
        raise refuse(label, node.op_type, f"its matrix B has shape {B.shape}; expected 2-D")
    _linear(reader, node, label, rule, B.T, np.zeros(B.shape[1]))
    reader.matmuls.add(node.output[0])


def _operands(reader, node, label):
    """``(value, constant name, whether the constant comes first)`` of a binary node with one constant operand."""
    a, b = node.input
    first = a in reader.constants
    if first == (b in reader.constants):
        raise refuse(label, node.op_type, "it combines two values computed from the input (or two constants); only "
                                          "a value with a constant initializer is an affine map")
    return (b, a, True) if first else (a, b, False)


def _fold_bias(reader, node, label, value, const):
    """Fold a constant added to a MatMul's output (read by nothing else) into its bias; whether it was."""
    width = reader.builder.shape(value)[-1]
    bias = reader.constant(node, const, label, "bias")
    if value not in reader.matmuls or reader.consumers.get(value) != 1 or bias.size != width or \
            bias.shape[-1:] != (width,):
        return False
    reader.matmuls.discard(value)
    reader.builder.replace_params(value, {"bias": bias.reshape(-1)})
    reader.builder.elide(node.output[0], value)
    return True


def affine(reader, node, label, attrs, rule):
    """``Sub``, ``Mul``, ``Div`` (and ``Add``) of a value and a constant broadcast to it: an affine map."""
    value, const, const_first = _operands(reader, node, label)
    c = per_sample(label, node.op_type, reader.constant(node, const, label, "operand"), len(reader.builder.shape(value)))
    params = affine_params(label, node.op_type, node.op_type.lower(), c, const_first)
    reader.builder.add(node.output[0], label, rule.name, [value], params=params)


def add(affine_rule):
    """``Add``: a sum of two values; a value plus a constant is a MatMul's bias (folded) or an affine map."""
    def convert(reader, node, label, attrs, rule):
        a, b = node.input
        if a not in reader.constants and b not in reader.constants:
            return reader.builder.add(node.output[0], label, rule.name, [a, b])
        value, const, _ = _operands(reader, node, label)
        if not _fold_bias(reader, node, label, value, const):
            affine(reader, node, label, attrs, affine_rule)
    return convert


def _targets(reader, node, label, name):
    """``{batch: integers}`` of a shape or repeats input: shape arithmetic, or a constant (one fixed batch)."""
    if name in reader.sizes:
        return {b: tuple(int(n) for n in v.reshape(-1)) for b, v in reader.sizes[name].items()}
    if name in reader.constants and reader.batch is not None:
        return {reader.batch: tuple(int(n) for n in np.asarray(reader.constants[name]).reshape(-1))}
    raise refuse(label, node.op_type, f"its input {name!r} is neither shape arithmetic nor a constant")


def _batched(reader, node, label, rule, make):
    """A constant made as large as the batch by ``make(array, integers)`` (``Expand``, ``Tile``): a constant
    node; of a value, the identity if it keeps the shape."""
    source = node.input[0]
    targets = _targets(reader, node, label, node.input[1])
    if source not in reader.constants:
        shape = reader.builder.shape(source)
        if any(make(np.zeros((b,) + shape), t).shape != (b,) + shape for b, t in targets.items()):
            raise refuse(label, node.op_type, "it enlarges a value computed from the input; only a constant "
                                              "may be expanded over the batch")
        return reader.builder.elide(node.output[0], source)
    c = reader.constant(node, source, label, "input")
    values = []
    for b, t in targets.items():
        full = make(c, t)
        if full.ndim < 2 or full.shape[0] != b:
            raise refuse(label, node.op_type, f"it makes a constant of shape {full.shape} for a batch of {b}; only a "
                                              "constant expanded over the batch axis is a value per sample")
        values.append(per_sample(label, node.op_type, full, full.ndim - 1))
    if any(v.shape != values[0].shape or not np.array_equal(v, values[0]) for v in values):
        raise refuse(label, node.op_type, "its per-sample value depends on the batch size")
    reader.builder.add(node.output[0], label, rule.name, [], params={"value": values[0]})


def expand(reader, node, label, attrs, rule):
    """``Expand``: a constant broadcast over the batch (a class token)."""
    _batched(reader, node, label, rule, lambda c, t: np.broadcast_to(c, np.broadcast_shapes(c.shape, t)))


def tile(reader, node, label, attrs, rule):
    """``Tile``: a constant repeated over the batch."""
    _batched(reader, node, label, rule, lambda c, t: np.tile(c, t) if len(t) == c.ndim else np.zeros(0))
