"""The torch importer's converters of the elementwise activations, their attributes read with torch's defaults.

A module (``nn.GELU``, ``nn.ELU``, ...) carries its attributes; a function (``F.gelu``, ``F.elu``, ...)
takes them after its input, positionally or by keyword.  The piecewise-linear ReLU6, Hardtanh, clamp and
Hardsigmoid are one op, ``clamp(slope * z + offset, min, max)`` (:mod:`sheaflinalg.network.ops.clamp`).  ``inplace`` changes nothing here (the
importer checks that no later node reads an overwritten value).
"""

import numbers

from .. import ops
from .builder import refuse
from .torch_modules import Step, bind

#: ``{rule: {attribute: torch's default}}`` (in the order of the function's arguments after the input).
DEFAULTS = {ops.gelu.RULE: {"approximate": "none"}, ops.softplus.RULE: {"beta": 1.0, "threshold": 20.0},
            ops.elu.RULE: {"alpha": 1.0}}


def _checked(rule, attrs, name, op):
    for key, value in attrs.items():
        if isinstance(DEFAULTS[rule][key], float):
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise refuse(name, op, f"{key} must be a number, got {value!r}")
            attrs[key] = float(value)
    return attrs


def activation_module(rule, torch, module, name, op, parent):
    """An activation module: its attributes as the module holds them."""
    attrs = {key: getattr(module, key) for key in DEFAULTS.get(rule, {})}
    return Step(rule, [parent], _checked(rule, attrs, name, op) if attrs else {})


def activation_function(rule, node, name, op):
    """An activation function or tensor method: its attributes from the call, torch's defaults elsewhere."""
    defaults = DEFAULTS.get(rule, {})
    attrs = dict(defaults)
    extra = node.args[1:]
    if len(extra) > len(defaults):
        raise refuse(name, op, f"its arguments {node.args} are not understood")
    attrs.update(zip(defaults, extra))
    for key, value in node.kwargs.items():
        if key not in defaults and key != "inplace":
            raise refuse(name, op, f"its argument {key}={value!r} is not understood")
        if key in defaults:
            attrs[key] = value
    return Step(rule, [node.args[0]], _checked(rule, attrs, name, op) if attrs else {})


def _clamp_step(rule, name, op, parent, low, high, slope=1.0, offset=0.0):
    """A clamp of ``slope * parent + offset`` to ``[low, high]`` (numeric bounds, ``low < high``)."""
    for key, value in (("min", low), ("max", high)):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise refuse(name, op, f"its {key} bound is {value!r}; only numeric bounds on both sides are supported")
    if not low < high:
        raise refuse(name, op, f"its bounds min={low!r}, max={high!r} are not increasing")
    return Step(rule, [parent], {"min": float(low), "max": float(high), "slope": slope, "offset": offset})


def hardtanh_module(rule, torch, module, name, op, parent):
    """``nn.Hardtanh`` and ``nn.ReLU6`` (a Hardtanh with bounds 0 and 6)."""
    return _clamp_step(rule, name, op, parent, module.min_val, module.max_val)


def hardsigmoid_module(rule, torch, module, name, op, parent):
    """``nn.Hardsigmoid``: ``clamp(z / 6 + 1 / 2, 0, 1)``."""
    return _clamp_step(rule, name, op, parent, 0.0, 1.0, 1.0 / 6.0, 0.5)


def _hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``F.hardtanh``'s signature."""


def _relu6(input, inplace=False):
    """``F.relu6``'s (and ``F.hardsigmoid``'s) signature."""


def _clamp(input, min=None, max=None):
    """``torch.clamp``'s (and ``Tensor.clamp``'s, ``clip``'s) signature."""


def hardtanh_function(rule, node, name, op):
    """``F.hardtanh``."""
    args = bind(_hardtanh, node)
    return _clamp_step(rule, name, op, args["input"], args["min_val"], args["max_val"])


def relu6_function(rule, node, name, op):
    """``F.relu6``: a Hardtanh with bounds 0 and 6."""
    return _clamp_step(rule, name, op, bind(_relu6, node)["input"], 0.0, 6.0)


def hardsigmoid_function(rule, node, name, op):
    """``F.hardsigmoid``."""
    return hardsigmoid_module(rule, None, None, name, op, bind(_relu6, node)["input"])


def clamp_function(rule, node, name, op):
    """``torch.clamp``, ``torch.clip``, ``Tensor.clamp`` and ``Tensor.clip`` with numeric bounds."""
    args = bind(_clamp, node)
    return _clamp_step(rule, name, op, args["input"], args["min"], args["max"])
