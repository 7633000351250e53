"""The ONNX importer's elementwise activations: the smooth ones and the clamps, entries of its table.

Sigmoid and Tanh inside the network, Gelu (``approximate``), Softplus, Elu (``alpha``), Mish, HardSwish and
Swish with ``alpha = 1`` (SiLU) become the smooth nodes of the same names; Clip (bounds as attributes
before opset 11, as inputs since) and HardSigmoid (``alpha``, ``beta``) become ``clamp`` nodes.  The
patterns an exporter writes for one activation (GELU's Erf, ``x * Sigmoid(x)``, ...) are matched into one
of these nodes first (:mod:`.onnx_patterns`).  A final Sigmoid or Tanh stays the output activation.
"""

import math

import numpy as np

from .. import ops
from .builder import Entry, refuse

#: ONNX's Softplus is ``log(1 + exp(z))`` everywhere: a threshold no value reaches (no linear piece).
NO_THRESHOLD = float(np.finfo(np.float64).max)


def _plain(reader, node, label, attrs, rule):
    """Sigmoid, Tanh, Mish, HardSwish: no attributes."""
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]])


def _gelu(reader, node, label, attrs, rule):
    approximate = attrs.get("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"approximate": approximate})


def _swish(reader, node, label, attrs, rule):
    if float(attrs.get("alpha", 1.0)) != 1.0:
        raise refuse(label, node.op_type, f"alpha={attrs['alpha']!r}; only x * sigmoid(x) (alpha=1, SiLU) is "
                                          "supported")
    _plain(reader, node, label, attrs, rule)


def _softplus(reader, node, label, attrs, rule):
    """Softplus (a matched ``Softplus(beta x) / beta`` carries ``beta``)."""
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {"beta": float(attrs.get("beta", 1.0)), "threshold": NO_THRESHOLD})


def _elu(reader, node, label, attrs, rule):
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"alpha": float(attrs.get("alpha", 1.0))})


def _clamp(reader, node, label, rule, low, high, slope=1.0, offset=0.0):
    if not (math.isfinite(low) and math.isfinite(high)):
        raise refuse(label, node.op_type, f"its bounds are min={low!r}, max={high!r}; only a clip with both "
                                          "bounds is supported")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {"min": low, "max": high, "slope": slope, "offset": offset})


def _bound(reader, node, label, index, what, default):
    """Clip's bound given as input ``index`` (a constant scalar), or ``default`` if it is absent."""
    if len(node.input) <= index or not node.input[index]:
        return default
    value = reader.constant(node, node.input[index], label, what)
    if value.size != 1:
        raise refuse(label, node.op_type, f"its {what} has {value.size} values; expected one")
    return float(value.reshape(-1)[0])


def _clip(reader, node, label, attrs, rule):
    low = float(attrs.get("min", _bound(reader, node, label, 1, "min", -math.inf)))
    high = float(attrs.get("max", _bound(reader, node, label, 2, "max", math.inf)))
    _clamp(reader, node, label, rule, low, high)


def _hard_sigmoid(reader, node, label, attrs, rule):
    """HardSigmoid: ``max(0, min(1, alpha z + beta))``, ONNX's defaults ``alpha = 0.2``, ``beta = 0.5``.  An alpha
    that is float32's rounding of 1/6 (torch's Hardsigmoid, ``relu6(z + 3) / 6``: float32 attributes cannot hold
    1/6) is read as 1/6."""
    alpha = float(attrs.get("alpha", 0.2))
    alpha = 1.0 / 6.0 if alpha == float(np.float32(1.0 / 6.0)) else alpha
    _clamp(reader, node, label, rule, 0.0, 1.0, alpha, float(attrs.get("beta", 0.5)))


#: ``{op_type: Entry(rule, convert)}`` of the activations, merged into the importer's table.
OPS = {"Sigmoid": Entry(ops.sigmoid.RULE, _plain), "Tanh": Entry(ops.tanh.RULE, _plain),
       "Gelu": Entry(ops.gelu.RULE, _gelu), "Swish": Entry(ops.silu.RULE, _swish),
       "Softplus": Entry(ops.softplus.RULE, _softplus), "Elu": Entry(ops.elu.RULE, _elu),
       "Mish": Entry(ops.mish.RULE, _plain), "HardSwish": Entry(ops.hardswish.RULE, _plain),
       "Clip": Entry(ops.clamp.RULE, _clip), "HardSigmoid": Entry(ops.clamp.RULE, _hard_sigmoid)}
