"""The operations of graph networks: one module per op, one registry.

Each module defines one :class:`~.rule.OpRule` (``RULE``) that owns everything
about its op (see :mod:`.rule`); :data:`RULES` maps op names to them, and
:func:`rule_of` is the one look-up, an error naming the op for one that is
not registered.  Adding an op: docs/design.md, section "Adding an op".
"""

from types import MappingProxyType

from . import (adaptive_avgpool, add, affine, avgpool, batchnorm, clamp, concat, constant, conv, conv_transpose, elu,
               gelu, groupnorm, hardswish, layernorm, leaky_relu, linear, matmul, maxpool, mean, mish, mul,
               normalize, pad, permute, relu, reshape, rmsnorm, roll, sigmoid, silu, slice, softmax, softplus, sum, tanh, upsample)
from .rule import MANY, MASK, PIECE, SELECTION, TANGENT, OpRule, PatternKind

#: ``{op name: rule}`` of every registered operation.
RULES = MappingProxyType({m.RULE.name: m.RULE for m in (linear, conv, avgpool, adaptive_avgpool, maxpool, batchnorm,
                                                        relu, leaky_relu, add, concat, reshape, permute, mean, pad,
                                                        slice, upsample, sum, sigmoid, tanh, gelu, silu, softplus,
                                                        elu, mish, hardswish, conv_transpose, layernorm, groupnorm,
                                                        rmsnorm, affine, constant, roll, clamp, mul, softmax,
                                                        matmul, normalize)})


def rule_of(op):
    """The :class:`OpRule` of the operation called ``op``; ValueError naming it if none is registered.

    Examples
    --------
    >>> rule_of("conv").params
    ('weight', 'bias')
    >>> rule_of("fft")
    Traceback (most recent call last):
    ...
    ValueError: unsupported operation 'fft'; supported: linear, conv, avgpool, adaptive_avgpool, maxpool, batchnorm, relu, leaky_relu, add, concat, reshape, permute, mean, pad, slice, upsample, sum, sigmoid, tanh, gelu, silu, softplus, elu, mish, hardswish, conv_transpose, layernorm, groupnorm, rmsnorm, affine, constant, roll, clamp, mul, softmax, matmul, normalize
    """
    try:
        return RULES[op]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported operation {op!r}; supported: {', '.join(RULES)}") from None


__all__ = ["RULES", "rule_of", "OpRule", "PatternKind", "MASK", "PIECE", "SELECTION", "TANGENT", "MANY"]
