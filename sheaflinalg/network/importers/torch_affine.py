"""The PyTorch importer's converters of values combined with constants: arithmetic with a parameter or a
number (``x * self.gamma``, ``x + self.pos_embed``, ``x / 8.0``), ``F.linear`` and ``x @ W`` with a parameter,
a parameter expanded over the batch (a class token), ``torch.roll``, and the eval-mode identities (``clone``,
``type_as``, ``expand_as``, torchvision's stochastic depth).

A value is constant when it is not computed from the network's input: a parameter or buffer read in
``forward`` (a torch.fx ``get_attr`` node), arithmetic on such values, or a Python number.  The importer
marks constant fx nodes (:func:`mark_constant`) before their readers are converted; their values are read
from the model's own run (``value`` in :attr:`~.torch_modules.Step.constants`).
"""

import numbers

import numpy as np

from .builder import affine_params, per_sample, refuse
from .torch_modules import Step, _dims, bind

#: The key of ``fx_node.meta`` that marks a value not computed from the network's input.
CONSTANT = "sheaflinalg.constant"


def mark_constant(fx_node):
    """Mark ``fx_node``'s value as constant (not computed from the network's input)."""
    fx_node.meta[CONSTANT] = True


def is_constant(value):
    """Whether an argument is a Python number or a marked constant fx node."""
    if hasattr(value, "op"):
        return bool(value.meta.get(CONSTANT))
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _binary(input, other, *, alpha=1, rounding_mode=None, out=None):
    """Stand-in signature of ``operator``'s, ``torch``'s and ``Tensor``'s add, sub, mul and div."""


def has_constant_operand(node):
    """Whether a binary operation reads a constant operand (then it is an affine map of its other operand)."""
    return any(is_constant(a) for a in list(node.args[:2]) + [node.kwargs.get("other")])


def affine_function(kind):
    """The converter of ``x + c``, ``c + x``, ``x - c``, ``c - x``, ``x * c``, ``c * x`` or ``x / c`` (``kind``, as
    :func:`~.builder.affine_params` reads it; ``alpha`` of a sum or difference read): an elementwise affine map of
    the value ``x`` with a constant ``c`` broadcast to it."""
    return lambda rule, node, name, op: _affine(kind, rule, node, name, op)


def _affine(kind, rule, node, name, op):
    args = bind(_binary, node)
    first, second, alpha = args["input"], args["other"], args["alpha"]
    if is_constant(first) == is_constant(second):
        raise refuse(name, op, "it combines two values computed from the input; only a value with a constant "
                               "(a parameter or a number) is an affine map")
    if args["rounding_mode"] is not None:
        raise refuse(name, op, "only the true division of a value by a constant is an affine map")
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or (alpha != 1 and kind in ("mul", "div")):
        raise refuse(name, op, f"alpha={alpha!r} is not a number")
    x, c = (second, first) if is_constant(first) else (first, second)

    def params(fx_node, shape, value):
        return affine_params(name, op, kind, per_sample(name, op, value(c), len(shape(x))), x is second, float(alpha))
    return Step(rule, [x], constants=params)


def _constant_operand(name, op, value, what):
    if not is_constant(value) or not hasattr(value, "op"):
        raise refuse(name, op, f"its {what} {value!r} is not a parameter or buffer of the model (a constant)")
    return value


def _linear(input, weight, bias=None):
    """Stand-in signature of ``F.linear``."""


def linear_function(rule, node, name, op):
    """``F.linear(x, weight, bias)`` with the model's parameters: a linear map of the last axis."""
    args = bind(_linear, node)
    weight = _constant_operand(name, op, args["weight"], "weight")
    bias = args["bias"] if args["bias"] is None else _constant_operand(name, op, args["bias"], "bias")

    def params(fx_node, shape, value):
        W = value(weight)
        return {"weight": W, "bias": np.zeros(W.shape[0]) if bias is None else value(bias)}
    return Step(rule, [args["input"]], constants=params)


def _matmul(input, other, *, out=None):
    """Stand-in signature of ``torch.matmul``, ``Tensor.matmul`` and ``@``."""


def matmul_function(rule, node, name, op):
    """``x @ W``, ``torch.matmul(x, W)`` with a 2-D parameter ``W`` of shape ``(in, out)``: ``linear`` with
    weight ``W.T``."""
    args = bind(_matmul, node)
    if is_constant(args["input"]):
        raise refuse(name, op, "a constant times a value (W @ x) is not supported; only x @ W maps the last axis")
    weight = _constant_operand(name, op, args["other"], "right operand")

    def params(fx_node, shape, value):
        W = value(weight)
        if W.ndim != 2:
            raise refuse(name, op, f"its right operand has shape {W.shape}; only a 2-D matrix maps the last axis")
        return {"weight": W.T.copy(), "bias": np.zeros(W.shape[1])}
    return Step(rule, [args["input"]], constants=params)


def expand_function(rule, node, name, op):
    """``c.expand(n, ...)`` (and ``expand_as``, ``repeat``) of a constant ``c`` over the batch: a node of the
    constant value (a class token); of a value, the identity if it keeps the shape (the importer checks)."""
    source = node.args[0]
    if not is_constant(source):
        return Step(None, [source])

    def params(fx_node, shape, value):
        full = value(fx_node)
        return {"value": per_sample(name, op, full, full.ndim - 1)}
    return Step(rule, [], constants=params)


def _roll(input, shifts, dims=None):
    """Stand-in signature of ``torch.roll`` and ``Tensor.roll``."""


def roll_function(rule, node, name, op):
    """``torch.roll``/``Tensor.roll`` along per-sample dims (without dims it rolls the batch too)."""
    args = bind(_roll, node)
    if args["dims"] is None:
        raise refuse(name, op, "without dims it rolls the flattened batch; give the per-sample dims")
    shifts = [args["shifts"]] if isinstance(args["shifts"], int) else list(args["shifts"])

    def attrs(fx_node, shape):
        dims = _dims(name, op, args["dims"], len(shape(args["input"])) + 1)
        if 0 in dims or len(dims) != len(shifts) or len(set(dims)) != len(dims):
            raise refuse(name, op, f"dims={args['dims']!r}, shifts={args['shifts']!r}: one shift per distinct "
                                   "per-sample dim (the batch axis 0 would mix the samples)")
        return {"shifts": tuple(int(s) for s in shifts), "axes": tuple(d - 1 for d in dims)}
    return Step(rule, [args["input"]], resolve=attrs)


def _stochastic_depth(input, p, mode, training=True):
    """Stand-in signature of torchvision's ``stochastic_depth``."""


def stochastic_depth_function(rule, node, name, op):
    """torchvision's stochastic depth (``StochasticDepth``, ``stochastic_depth``) in eval mode: elided."""
    args = bind(_stochastic_depth, node)
    if args["training"] and args["p"] > 0:
        raise refuse(name, op, "stochastic depth in training mode is random; call model.eval() first")
    return Step(rule, [args["input"]])
