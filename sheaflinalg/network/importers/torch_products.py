"""The torch importer's converters of products of two values, the softmax, and attention.

``x * y`` (``operator.mul``, ``torch.mul``, ``Tensor.mul``) of two values computed from the input becomes a
``mul`` node; ``x @ y`` (``operator.matmul``, ``torch.matmul``, ``torch.bmm``, ``Tensor.matmul``) a
``matmul`` node; an interior ``softmax`` (``torch.softmax``, ``F.softmax``, ``Tensor.softmax``,
``nn.Softmax``) a ``softmax`` node over one per-sample axis (a final one stays the output activation);
``F.scaled_dot_product_attention`` (no mask, or ``is_causal=True``) the nodes ``K^T``, the scaled scores
``Q K^T * scale`` (one ``matmul`` with ``alpha``), their softmax (``causal``) and ``P V``.  A product with
a constant operand is handed to the affine converters by the table (``x * c`` an ``affine`` node, ``x @ W`` a
``linear`` one); an operand these converters see that is not computed from the input is refused.
"""

import math

import numpy as np

from .. import ops
from .builder import Inner, refuse
from .torch_modules import Step, bind

def _mul(input, other):
    """Stand-in signature of ``torch.mul`` and ``Tensor.mul``."""


def _matmul(input, other):
    """Stand-in signature of ``torch.matmul``, ``torch.bmm`` and ``Tensor.matmul``."""


def _softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Stand-in signature of ``F.softmax``, ``torch.softmax`` and ``Tensor.softmax``."""


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Stand-in signature of ``F.scaled_dot_product_attention``."""


def _computed(name, op, values):
    """Refuse an operand that is not computed from the input (a number, a parameter, a buffer)."""
    for value in values:
        if not hasattr(value, "op") or value.op == "get_attr":
            raise refuse(name, op, f"one operand, {value!r}, is a constant or a parameter; only the product of two "
                                   "values computed from the input is supported")


def _same_rank(name, op, parents, at_least=1):
    """A resolver that refuses operands of different ranks (the batch axes would not line up)."""
    def check(node, shape):
        ranks = [len(shape(p)) for p in parents]
        if len(set(ranks)) != 1 or ranks[0] < at_least:
            raise refuse(name, op, f"its operands have per-sample shapes {[shape(p) for p in parents]}; they must "
                                   f"have the same rank (at least {at_least}), so that the batch axes line up")
        return {}
    return check


def mul_function(rule, node, name, op):
    """``x * y``, ``torch.mul``, ``Tensor.mul`` of two values: a ``mul`` node."""
    args = bind(_mul, node)
    parents = [args["input"], args["other"]]
    _computed(name, op, parents)
    return Step(rule, parents, resolve=_same_rank(name, op, parents))


def matmul_function(rule, node, name, op):
    """``x @ y``, ``torch.matmul``, ``torch.bmm``, ``Tensor.matmul`` of two values: a ``matmul`` node."""
    args = bind(_matmul, node)
    parents = [args["input"], args["other"]]
    _computed(name, op, parents)
    check = _same_rank(name, op, parents, at_least=2)
    return Step(rule, parents, resolve=lambda fx, shape: {**check(fx, shape), "alpha": 1.0})


def _axis(name, op, dim):
    """A resolver of the per-sample axis of ``dim`` (refusing the batch axis)."""
    def axis(parent, shape):
        ndim = len(shape(parent)) + 1
        if not isinstance(dim, int) or isinstance(dim, bool) or not -ndim <= dim < ndim or dim % ndim == 0:
            raise refuse(name, op, f"dim={dim!r} is not a per-sample axis of these rank-{ndim} values")
        return dim % ndim - 1
    return axis


def softmax_step(rule, name, op, parent, dim, dtype=None):
    """A softmax over the per-sample axis ``dim``."""
    if dim is None:
        raise refuse(name, op, "a softmax without dim (torch's implicit choice) is not supported; give dim")
    if dtype is not None:
        raise refuse(name, op, f"dtype={dtype!r} is not supported")
    axis = _axis(name, op, dim)
    return Step(rule, [parent], resolve=lambda node, shape: {"axis": axis(parent, shape), "causal": False})


def softmax_function(rule, node, name, op):
    """``torch.softmax``, ``F.softmax``, ``Tensor.softmax`` inside the network."""
    args = bind(_softmax, node)
    return softmax_step(rule, name, op, args["input"], args["dim"], args["dtype"])


def softmax_module(rule, torch, module, name, op, parent):
    """``nn.Softmax`` inside the network."""
    return softmax_step(rule, name, op, parent, module.dim)


def attention_function(rule, node, name, op):
    """``F.scaled_dot_product_attention(q, k, v)``: ``softmax(q k^T * scale) v``, causal or not, as four nodes."""
    args = bind(_attention, node)
    q, k, v = args["query"], args["key"], args["value"]
    _computed(name, op, [q, k, v])
    if args["attn_mask"] is not None or args["dropout_p"] != 0.0 or args["enable_gqa"]:
        raise refuse(name, op, "only attention without attn_mask, dropout_p or enable_gqa is supported (a causal "
                               "mask: is_causal=True)")
    return attention_step(rule, node.name, q, k, v, args["scale"], bool(args["is_causal"]),
                          _same_rank(name, op, [q, k, v], at_least=2))


def attention_step(rule, key, q, k, v, scale, causal, check, mask=None):
    """``softmax(q k^T * scale [+ mask]) v`` (``rule``: matmul) as the nodes ``K^T``, the scaled scores, the
    constant additive ``mask`` (an ``affine`` node, if given: one sample's array), their softmax (``causal``)
    and the product with ``v``; ``scale`` None is ``1 / sqrt(d)``.  ``check(node, shape)`` refuses operands
    that do not fit; the inner values are keyed after ``key``."""
    keys, scores, masked, weights = (Inner(f"{key}.{part}") for part in ("keys", "scores", "masked", "weights"))

    def transposed(fx, shape):
        check(fx, shape)
        n = len(shape(k))
        return {"axes": tuple(range(n - 2)) + (n - 1, n - 2)}

    def scaled(fx, shape):
        return {"alpha": float(scale if scale is not None else 1.0 / math.sqrt(shape(q)[-1]))}

    def softmax(fx, shape):
        return {"axis": len(shape(q)) - 1, "causal": causal}
    inner = [(keys, "keys", Step(ops.permute.RULE, [k], resolve=transposed)),
             (scores, "scores", Step(rule, [q, keys], resolve=scaled))]
    if mask is not None:
        inner.append((masked, "mask", Step(ops.affine.RULE, [scores], params={"scale": np.ones(1), "shift": mask})))
    inner.append((weights, "weights", Step(ops.softmax.RULE, [masked if mask is not None else scores],
                                           resolve=softmax)))
    return Step(rule, [weights, v], {"alpha": 1.0}, inner=inner)
