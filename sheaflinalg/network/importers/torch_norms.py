"""The torch importer's converters of the normalisations: ``nn.LayerNorm``, ``nn.GroupNorm``, ``nn.RMSNorm`` and
``F.layer_norm``, ``F.group_norm``, ``F.rms_norm``.

Each becomes the normalising node (``layernorm``, ``groupnorm``, ``rmsnorm``) and, for a weight or bias, a
second node after it (:mod:`.norm_affine`).  An ``eps`` of None (RMSNorm's default) is torch's: the machine
epsilon of the input's dtype, float64 here (the network computes in float64).  A function's weight and bias
are parameters or buffers the model reads (``self.weight``), or None.
"""

import numbers

import numpy as np

from .builder import refuse
from .norm_affine import affine_part
from .torch_modules import Step, bind, model_parameter, torch_values


def norm_eps(name, op, eps):
    if eps is None:
        return float(np.finfo(np.float64).eps)
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps > 0:
        raise refuse(name, op, f"eps must be a positive number, got {eps!r}")
    return float(eps)


def _normalized_shape(name, op, value):
    shape = (value,) if isinstance(value, numbers.Integral) else tuple(value)
    if not shape or not all(isinstance(n, numbers.Integral) for n in shape):
        raise refuse(name, op, f"normalized_shape must be one or more integers, got {value!r}")
    return shape


def norm_step(rule, name, op, parent, attrs, scale, shift, per_channel=False):
    """The normalising node of ``rule`` and its affine part (resolved once the parent's shape is known)."""
    def then(node, shape):
        return affine_part(name, op, shape(parent), scale, shift, per_channel)
    return Step(rule, [parent], attrs, then=then)


def _read(torch, module, name, op, key):
    value = getattr(module, key, None)
    return None if value is None else torch_values(torch, value, f"layer {name} ({op}) {key}")


def layernorm_module(rule, torch, module, name, op, parent):
    """``nn.LayerNorm`` (``rule``: layernorm) and ``nn.RMSNorm`` (rmsnorm, no bias)."""
    attrs = {"n_axes": len(_normalized_shape(name, op, module.normalized_shape)), "eps": norm_eps(name, op, module.eps)}
    return norm_step(rule, name, op, parent, attrs, _read(torch, module, name, op, "weight"),
                 _read(torch, module, name, op, "bias"))


def groupnorm_module(rule, torch, module, name, op, parent):
    """``nn.GroupNorm``: its affine is per channel (a ``batchnorm`` node)."""
    return norm_step(rule, name, op, parent, {"groups": int(module.num_groups), "eps": norm_eps(name, op, module.eps)},
                 _read(torch, module, name, op, "weight"), _read(torch, module, name, op, "bias"), per_channel=True)


def _constant(node, value, name, op, key):
    """A function's weight or bias: None, or a parameter or buffer of the model (an fx ``get_attr``)."""
    if value is None:
        return None
    import torch

    return torch_values(torch, model_parameter(name, op, value, key), f"{name} {key}")


def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """F.layer_norm's signature."""


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """F.group_norm's signature."""


def _rms_norm(input, normalized_shape, weight=None, eps=None):
    """F.rms_norm's signature."""


def _trailing(rule, node, name, op, signature):
    args = bind(signature, node)
    attrs = {"n_axes": len(_normalized_shape(name, op, args["normalized_shape"])), "eps": norm_eps(name, op, args["eps"])}
    return norm_step(rule, name, op, args["input"], attrs, _constant(node, args["weight"], name, op, "weight"),
                 _constant(node, args.get("bias"), name, op, "bias"))


def layernorm_function(rule, node, name, op):
    """``F.layer_norm``."""
    return _trailing(rule, node, name, op, _layer_norm)


def rmsnorm_function(rule, node, name, op):
    """``F.rms_norm``."""
    return _trailing(rule, node, name, op, _rms_norm)


def groupnorm_function(rule, node, name, op):
    """``F.group_norm``."""
    args = bind(_group_norm, node)
    groups = args["num_groups"]
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool):
        raise refuse(name, op, f"num_groups must be an integer, got {groups!r}")
    return norm_step(rule, name, op, args["input"], {"groups": int(groups), "eps": norm_eps(name, op, args["eps"])},
                 _constant(node, args["weight"], name, op, "weight"), _constant(node, args["bias"], name, op, "bias"),
                 per_channel=True)


def _normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """F.normalize's signature."""


def normalize_step(rule, name, op, parent, p, dim, eps):
    """An L2 normalisation over the last per-sample axis ``dim`` (an ATen dim, the batch's included)."""
    if p != 2:
        raise refuse(name, op, f"only the L2 norm (p=2) is supported, got p={p!r}")
    eps = norm_eps(name, op, eps)

    def last(node, shape):
        ndim = len(shape(parent)) + 1
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim % ndim != ndim - 1 or ndim < 2:
            raise refuse(name, op, f"dim={dim!r} of these rank-{ndim} values: only the last axis (dim=-1) is "
                                   "supported")
        return {"eps": eps}
    return Step(rule, [parent], resolve=last)


def normalize_function(rule, node, name, op):
    """``F.normalize(x, p=2, dim=-1, eps)``: a ``normalize`` node."""
    args = bind(_normalize, node)
    if args["out"] is not None:
        raise refuse(name, op, "out= is not supported")
    return normalize_step(rule, name, op, args["input"], args["p"], args["dim"], args["eps"])
