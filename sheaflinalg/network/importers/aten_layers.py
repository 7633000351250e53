"""The torch.export importer's converters of layers: convolutions, poolings, normalisations, padding,
upsampling, ``roll``, the softmax and attention (see :mod:`.aten_ops` for the converters' signature).

Each hands the ATen call's arguments (positional, in ATen's order) to the step the torch.fx importer
builds for the same layer (:mod:`.torch_modules`, :mod:`.torch_norms`, :mod:`.torch_products`).  Layers
reading channels or windows need the batch first (``program.standard``); the softmax, the normalisations
over trailing axes and attention need only that the samples are not in the axes they act on.
"""

import numpy as np

from .. import ops
from .builder import Inner, fold_batchnorm, refuse
from .torch_affine import roll_function
from .torch_modules import (POOL_SIGNATURES, Step, adaptive_step, bind, conv_transpose_step, pad_step, upsample_step,
                            weight_and_bias, window_attrs)
from .torch_norms import norm_eps, norm_step
from .torch_products import attention_step, softmax_step


def _constant(program, name, op, arg, what):
    """A constant argument's float64 array (None stays None); a refusal for a value computed from the input."""
    if arg is None:
        return None
    if program.is_value(arg):
        raise refuse(name, op, f"its {what} is computed from the input; only the model's parameters are supported")
    return program.value(arg)


def convolution(rule, program, node, name, op):
    """``convolution(x, W, b, stride, padding, dilation, transposed, output_padding, groups)``."""
    x, W, b, stride, padding, dilation, transposed, output_padding, groups = node.args
    program.standard(x, name, op)
    torch = program.torch
    weight = torch.from_numpy(_constant(program, name, op, W, "weight"))
    bias = None if b is None else torch.from_numpy(_constant(program, name, op, b, "bias"))
    args = {"stride": stride, "padding": padding, "dilation": dilation, "output_padding": output_padding,
            "groups": groups}
    if transposed:
        return conv_transpose_step(ops.conv_transpose.RULE, torch, name, op, x, args, weight, bias)
    attrs = window_attrs(name, op, weight.dim() - 2, args, ("stride", "padding", "dilation"))
    return Step(rule, [x], {**attrs, "groups": int(groups)}, weight_and_bias(torch, weight, bias, f"{name} ({op})"))


def batch_norm(rule, program, node, name, op):
    """``_native_batch_norm_legit_no_training(x, weight, bias, mean, var, momentum, eps)``: per-channel affine."""
    x, weight, bias, mean, var, _, eps = node.args
    program.standard(x, name, op)
    mean, var = _constant(program, name, op, mean, "running mean"), _constant(program, name, op, var, "running var")
    gamma = _constant(program, name, op, weight, "weight")
    beta = _constant(program, name, op, bias, "bias")
    scale, shift = fold_batchnorm(name, op, np.ones_like(mean) if gamma is None else gamma,
                                  np.zeros_like(mean) if beta is None else beta, mean, var, eps)
    return Step(rule, [x], params={"scale": scale, "shift": shift})


def layer_norm(rule, program, node, name, op):
    """``native_layer_norm(x, normalized_shape, weight, bias, eps)`` (``rms_norm(x, shape, weight, eps)``):
    over trailing per-sample axes, its affine part a node after it."""
    args = list(node.args) + [None] * (5 - len(node.args))
    x, shape = args[:2]
    weight, bias, eps = (args[2], None, args[3]) if op.startswith("aten.rms_norm") else args[2:5]
    ndim = len(program.aten_shape(x))
    if program.layout(x).dim >= ndim - len(shape):
        raise refuse(name, op, "its normalized dims hold the samples of the batch")
    return norm_step(rule, name, op, x, {"n_axes": len(shape), "eps": norm_eps(name, op, eps)},
                     _constant(program, name, op, weight, "weight"), _constant(program, name, op, bias, "bias"))


def group_norm(rule, program, node, name, op):
    """``native_group_norm(x, weight, bias, N, C, HxW, groups, eps)``: its affine part per channel."""
    x, weight, bias, _, _, _, groups, eps = node.args
    program.standard(x, name, op)
    return norm_step(rule, name, op, x, {"groups": int(groups), "eps": norm_eps(name, op, eps)},
                     _constant(program, name, op, weight, "weight"), _constant(program, name, op, bias, "bias"),
                     per_channel=True)


def pool(step):
    """The converter of ``max_pool2d_with_indices`` (``maxpool_step``) or ``avg_pool1d/2d`` (``avgpool_step``)."""
    def convert(rule, program, node, name, op):
        x = node.args[0]
        program.standard(x, name, op)
        return step(rule, name, op, len(program.shape(x)) - 1, x, bind(POOL_SIGNATURES[step], node))
    return convert


def adaptive(rule, program, node, name, op):
    """``adaptive_avg_pool1d/2d``: the output size read off the value torch computed."""
    program.standard(node.args[0], name, op)
    return adaptive_step(rule, node.args[0])


def pad(rule, program, node, name, op):
    """``constant_pad_nd(x, pad, value)`` with zeros: elided where it pads nothing; where it pads the first
    per-sample axis (channels-last values: Swin's windows), an unpadded axis is moved first around it."""
    x, pads = node.args[:2]
    program.standard(x, name, op)
    pad_step(rule, name, op, x, pads, "constant", node.args[2] if len(node.args) > 2 else 0.0)    # checks
    n = len(program.shape(x))
    pairs = [(0, 0)] * (n - len(pads) // 2) + [tuple(pads[i:i + 2]) for i in range(0, len(pads), 2)][::-1]
    if len(pairs) > n:
        raise refuse(name, op, f"pad={list(pads)!r} pads the batch axis")
    if not any(p for pair in pairs for p in pair):
        return Step(None, [x])
    if pairs[0] == (0, 0):
        return pad_step(rule, name, op, x, pads[:2 * (n - 1)], "constant", 0.0)
    if (0, 0) not in pairs:
        raise refuse(name, op, f"pad={list(pads)!r} pads every per-sample axis; one (the channels) must stay")
    order, moved_pads = ops.pad.around_unpadded_axis(pairs)
    moved, padded = Inner(f"{node.name}.moved"), Inner(f"{node.name}.padded")
    inner = [(moved, "moved", Step(ops.permute.RULE, [x], {"axes": order})),
             (padded, "padded", Step(rule, [moved], {"pads": moved_pads}))]
    return Step(ops.permute.RULE, [padded], {"axes": tuple(int(a) for a in np.argsort(order))}, inner=inner)


#: torch's interpolation modes by the ATen upsampling op.
UPSAMPLING = {"upsample_nearest1d": "nearest", "upsample_nearest2d": "nearest", "upsample_linear1d": "linear",
              "upsample_bilinear2d": "bilinear"}


def upsample(rule, program, node, name, op):
    """``upsample_nearest1d/2d(x, output_size, scales)``, ``upsample_(bi)linear1d/2d(x, output_size,
    align_corners, scales)``: integer factors read off the value torch computed."""
    x = node.args[0]
    program.standard(x, name, op)
    mode = UPSAMPLING[op.split(".")[1]]
    align = node.args[2] if mode != "nearest" and len(node.args) > 2 else None
    return upsample_step(rule, name, op, x, size=program.aten_shape(node)[2:], mode=mode,
                         align_corners=bool(align) if mode != "nearest" else None)


def softmax(rule, program, node, name, op):
    """``_softmax(x, dim, half_to_float)`` over a per-sample axis."""
    x, dim = node.args[:2]
    return softmax_step(rule, name, op, x, program.axis(x, dim, name, op) + 1)


def attention(rule, program, node, name, op):
    """``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)``; a constant boolean mask
    is causal (lower triangular) or none (all true), a float one is added to the scores."""
    args = list(node.args) + [None, 0.0, False][len(node.args) - 3:]
    q, k, v, mask, dropout, causal = args[:6]
    if dropout or node.kwargs.get("enable_gqa"):
        raise refuse(name, op, "dropout_p and enable_gqa are not supported")
    values = [q, k, v]
    if any(not program.is_value(t) for t in values) or len({program.layout(t) for t in values}) != 1:
        raise refuse(name, op, "its query, key and value must be values computed from the input, laid out alike")
    if program.layout(q).dim >= len(program.aten_shape(q)) - 2:
        raise refuse(name, op, "the samples of the batch are in its sequence or feature dims")

    def check(fx, shape):
        if len({len(shape(t)) for t in values}) != 1:
            raise refuse(name, op, "its query, key and value have different ranks")
    causal, additive = _mask(program, name, op, node, mask, bool(causal))
    return attention_step(rule, node.name, q, k, v, node.kwargs.get("scale"), causal, check, additive)


def _mask(program, name, op, node, mask, causal):
    """``(causal, additive mask or None)`` of an attention mask."""
    if mask is None:
        return causal, None
    if program.is_value(mask):
        raise refuse(name, op, "its attention mask is computed from the input; only a constant mask is supported")
    q, k = node.args[:2]
    scores = program.aten_shape(q)[:-1] + program.aten_shape(k)[-2:-1]
    sample = program.sample(name, op, mask, q, scores)
    if program.tensor(mask).dtype == program.torch.bool:
        if sample.all():
            return causal, None
        tril = np.tril(np.ones(sample.shape[-2:], dtype=bool))
        if np.array_equal(sample, np.broadcast_to(tril, sample.shape)):
            return True, None
        raise refuse(name, op, "its boolean attention mask is neither causal (lower triangular) nor all true")
    if not np.all(np.isfinite(sample)):
        raise refuse(name, op, "its float attention mask is not finite; only a finite additive mask is supported")
    return causal, sample if np.any(sample) else None


def roll(rule, program, node, name, op):
    """``roll(x, shifts, dims)`` of per-sample dims."""
    program.standard(node.args[0], name, op)
    return roll_function(rule, node, name, op)
