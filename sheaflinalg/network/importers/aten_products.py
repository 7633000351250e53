"""The torch.export importer's converters of arithmetic and matrix products (see :mod:`.aten_ops`).

``add``, ``sub``, ``mul``, ``div`` of a value and a constant are an ``affine`` node (the constant laid out as
one sample's array, :func:`~.builder.affine_params`); of two values ``add`` (``sub``: the second negated
first) and ``mul`` (a quotient of two values is refused); ``pow`` by 2, 3 or 4 products of the value with
itself; ``where`` with a constant condition and a finite constant fill an ``affine`` node (scale 1 where
the value is kept, 0 where the fill replaces it).  ``linear``, ``addmm``, ``mm``, ``bmm``, ``matmul`` of a
value with a constant matrix (the same for every leading index) are ``linear`` on the last axis; of two
values, ``matmul``.
"""

import numbers

import numpy as np

from .. import ops
from .builder import Inner, affine_params, refuse
from .torch_modules import Step
from .torch_products import matmul_function as product_matmul


def _same_layout(program, name, op, values):
    if len({program.layout(v) for v in values}) != 1 or len({len(program.aten_shape(v)) for v in values}) != 1:
        raise refuse(name, op, "its two values hold the samples of the batch differently (another dim or rank)")


def binary(kind):
    """The converter of ATen's ``add``, ``sub``, ``mul`` or ``div`` (``kind``) of values and constants."""
    return lambda rule, program, node, name, op: _binary(kind, rule, program, node, name, op)


def _binary(kind, rule, program, node, name, op):
    first, second = node.args[:2]
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    if node.kwargs.get("rounding_mode") is not None:
        raise refuse(name, op, "only the true division is supported")
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool):
        raise refuse(name, op, f"alpha={alpha!r} is not a number")
    if program.is_value(first) and program.is_value(second):
        return _two_values(kind, rule, program, node, name, op, float(alpha))
    x, c = (first, second) if program.is_value(first) else (second, first)
    sample = program.sample(name, op, c, node)
    return Step(ops.affine.RULE, [x], params=affine_params(name, op, kind, sample, x is second, float(alpha)))


def _two_values(kind, rule, program, node, name, op, alpha):
    first, second = node.args[:2]
    _same_layout(program, name, op, [first, second])
    if kind == "div":
        raise refuse(name, op, "a quotient of two values computed from the input is not supported")
    if kind == "mul":
        return Step(rule, [first, second])
    if program.aten_shape(first) != program.aten_shape(second):
        raise refuse(name, op, f"it broadcasts values of shapes {program.aten_shape(first)} and "
                               f"{program.aten_shape(second)}; a sum of two values needs one shape")
    if kind == "add" and alpha == 1.0:
        return Step(rule, [first, second])
    scaled = Inner(f"{node.name}.scaled")
    sign = -alpha if kind == "sub" else alpha
    inner = [(scaled, "scaled", Step(ops.affine.RULE, [second], params={"scale": np.array([sign]),
                                                                       "shift": np.zeros(1)}))]
    return Step(ops.add.RULE, [first, scaled], inner=inner)


def power(rule, program, node, name, op):
    """``pow(x, n)`` for n = 1..4: ``x``, or products of ``x`` with itself (``mul`` nodes)."""
    x, n = node.args
    if not isinstance(n, numbers.Real) or float(n) not in (1.0, 2.0, 3.0, 4.0):
        raise refuse(name, op, f"only integer powers 1 to 4 are supported (products of the value), got {n!r}")
    if n == 1:
        return Step(None, [x])
    square = Inner(f"{node.name}.square")
    if n == 2:
        return Step(rule, [x, x])
    inner = [(square, "square", Step(rule, [x, x]))]
    return Step(rule, [square, x] if n == 3 else [square, square], inner=inner)


def where(rule, program, node, name, op):
    """``where(cond, a, b)`` with a constant ``cond`` and one of ``a``, ``b`` a finite constant: an affine map
    of the other (a masked fill)."""
    cond, a, b = node.args
    if program.is_value(cond) or program.is_value(a) == program.is_value(b):
        raise refuse(name, op, "only a constant condition choosing between a value and a constant is supported")
    keep = program.sample(name, op, cond, node).astype(bool)
    x, fill = (a, b) if program.is_value(a) else (b, a)
    keep = keep if x is a else ~keep
    fill = program.sample(name, op, fill, node)
    if not np.all(np.isfinite(fill)):
        raise refuse(name, op, "its fill is not finite (-inf); only a finite fill is an affine map (an attention "
                               "mask: pass it to scaled_dot_product_attention, or is_causal=True)")
    shape = program.shape(node)
    scale = np.broadcast_to(keep, shape).astype(np.float64)
    return Step(rule, [x], params={"scale": scale, "shift": np.where(scale == 1.0, 0.0,
                                                                     np.broadcast_to(fill, shape))})


def _matrix(program, name, op, constant):
    """A constant right operand as one ``(in, out)`` matrix, the same for every leading index."""
    W = program.value(constant)
    if W.ndim < 2:
        raise refuse(name, op, f"its right operand has shape {W.shape}; a matrix is expected")
    stack = W.reshape((-1,) + W.shape[-2:])
    if not np.all(stack == stack[:1]):
        raise refuse(name, op, f"its constant of shape {W.shape} differs between its leading indices")
    return stack[0]


def _linear(program, name, op, x, W, bias=None, alpha=1.0, beta=1.0):
    """``alpha x @ W + beta bias`` of a value ``x``: a ``linear`` node with weight ``alpha W^T``."""
    if not program.is_value(x):
        raise refuse(name, op, "a constant times a value (W @ x) is not supported; only x @ W maps the last axis")
    b = np.zeros(W.shape[1]) if bias is None else beta * np.broadcast_to(program.value(bias), (1, W.shape[1]))
    if b.ndim == 2 and b.shape[0] != 1:
        raise refuse(name, op, f"its bias of shape {b.shape} differs between the rows")
    return Step(ops.linear.RULE, [x], params={"weight": alpha * W.T.copy(), "bias": np.asarray(b).reshape(-1).copy()})


def linear(rule, program, node, name, op):
    """``linear(x, W, b)``."""
    x, W = node.args[:2]
    bias = node.args[2] if len(node.args) > 2 else None
    if program.is_value(W) or (bias is not None and program.is_value(bias)):
        raise refuse(name, op, "its weight and bias must be constants (the model's parameters)")
    return _linear(program, name, op, x, program.value(W).T, bias)


def addmm(rule, program, node, name, op):
    """``addmm(b, x, W, beta, alpha)``: ``beta b + alpha x @ W`` with constants ``b`` and ``W``."""
    bias, x, W = node.args[:3]
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    if program.is_value(bias) or program.is_value(W):
        raise refuse(name, op, "only a bias and a matrix that are constants are supported")
    return _linear(program, name, op, x, _matrix(program, name, op, W), bias, float(alpha), float(beta))


def product(rule, program, node, name, op):
    """``mm``, ``bmm``, ``matmul``: ``linear`` with a constant right operand, else ``matmul`` of two values."""
    a, b = node.args[:2]
    if program.is_value(a) and program.is_value(b):
        _same_layout(program, name, op, [a, b])
        if program.layout(a).dim >= len(program.aten_shape(a)) - 2:
            raise refuse(name, op, "the samples of the batch are in its matrices' dims; they would be mixed")
        return product_matmul(rule, node, name, op)
    if program.is_value(b):
        raise refuse(name, op, "a constant times a value (W @ x) is not supported; only x @ W maps the last axis")
    return _linear(program, name, op, a, _matrix(program, name, op, b))
