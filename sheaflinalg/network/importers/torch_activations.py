"""The torch importer's converters of the elementwise activations, their attributes read with torch's defaults.

A module (``nn.GELU``, ``nn.ELU``, ...) carries its attributes; a function (``F.gelu``, ``F.elu``, ...)
takes them after its input, positionally or by keyword.  ``inplace`` changes nothing here (the
importer checks that no later node reads an overwritten value).
"""

import numbers

from .. import ops
from .builder import refuse
from .torch_modules import Step

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
