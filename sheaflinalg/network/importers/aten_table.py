"""The torch.export importer's table: every supported ATen op (by its name without overload), the graph op it
becomes and its converter ``convert(rule, program, node, name, op)`` (:mod:`.aten_ops`,
:mod:`.aten_products`, :mod:`.aten_layers`; elementwise activations through the torch.fx importer's own
converters, which read ATen's arguments alike).

:data:`KEPT` lists the ops the importer reads whole, which ``run_decompositions`` would otherwise write as
core ATen: linear maps and matrix products (so a linear layer on a sequence stays one ``linear`` node),
attention, the smooth activations and upsampling.
"""

from .. import ops
from .aten_layers import (adaptive, attention, batch_norm, convolution, group_norm, layer_norm, pad, pool, roll,
                          softmax, upsample)
from .aten_normalize import VECTOR_NORM, or_normalize
from .aten_ops import cat, getitem, permute, reduction, select, slice_tensor, split, view
from .aten_products import addmm, binary, linear, power, product, where
from .builder import Entry
from .torch_activations import (activation_function, clamp_function, hardsigmoid_function, hardtanh_function,
                                relu6_function)
from .torch_modules import avgpool_step, leaky_function, maxpool_step, plain_step

#: ATen ops (by name) that the export keeps whole instead of decomposing them.
KEPT = ("linear", "matmul", "scaled_dot_product_attention", "silu", "hardswish", "hardsigmoid", "mish", "softplus",
        "relu6", "rms_norm", "upsample_nearest1d", "upsample_nearest2d", "upsample_linear1d", "upsample_bilinear2d",
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "roll", "max_pool1d", "max_pool2d", "avg_pool1d")
#: ``{ATen op: output activation}`` of the final activations.
FINALS = {"sigmoid": "sigmoid", "tanh": "tanh", "_softmax": "softmax"}


def _fx(convert):
    """A torch.fx importer's function converter ``convert(rule, node, name, op)`` (activations: elementwise, so
    the batch may be anywhere)."""
    return lambda rule, program, node, name, op: convert(rule, node, name, op)


def _plain(rule, program, node, name, op):
    return plain_step(rule, node.args[0])


def _activations():
    smooth = {"sigmoid": ops.sigmoid.RULE, "tanh": ops.tanh.RULE, "gelu": ops.gelu.RULE, "silu": ops.silu.RULE,
              "softplus": ops.softplus.RULE, "elu": ops.elu.RULE, "mish": ops.mish.RULE,
              "hardswish": ops.hardswish.RULE}
    return {"relu": Entry(ops.relu.RULE, _plain), "leaky_relu": Entry(ops.leaky_relu.RULE, _fx(leaky_function)),
            "clamp": Entry(ops.clamp.RULE, _fx(clamp_function)), "hardtanh": Entry(ops.clamp.RULE,
                                                                                   _fx(hardtanh_function)),
            "relu6": Entry(ops.clamp.RULE, _fx(relu6_function)),
            "hardsigmoid": Entry(ops.clamp.RULE, _fx(hardsigmoid_function)),
            **{name: Entry(rule, _fx(activation_function)) for name, rule in smooth.items()}}


_VIEW = Entry(ops.reshape.RULE, view)
_PRODUCT = Entry(ops.matmul.RULE, product)
_POOL_MAX = Entry(ops.maxpool.RULE, pool(maxpool_step))
_POOL_AVG = Entry(ops.avgpool.RULE, pool(avgpool_step))
_ADAPTIVE = Entry(ops.adaptive_avgpool.RULE, adaptive)
_UPSAMPLE = Entry(ops.upsample.RULE, upsample)

#: ``{ATen op name: Entry}``.
ATEN = {**{name: _VIEW for name in ("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten", "clone",
                                    "alias", "_to_copy", "expand", "detach", "contiguous")},
        "permute": Entry(ops.permute.RULE, permute), "slice": Entry(ops.slice.RULE, slice_tensor),
        "select": Entry(ops.slice.RULE, select), "split_with_sizes": Entry(None, split),
        "split": Entry(None, split), "getitem": Entry(ops.slice.RULE, getitem), "cat": Entry(ops.concat.RULE, cat),
        "mean": Entry(ops.mean.RULE, reduction), "sum": Entry(ops.sum.RULE, reduction),
        "add": Entry(ops.add.RULE, binary("add")), "sub": Entry(ops.add.RULE, binary("sub")),
        "mul": Entry(ops.mul.RULE, binary("mul")), "div": Entry(ops.mul.RULE, binary("div")),
        "pow": Entry(ops.mul.RULE, power), "where": Entry(ops.affine.RULE, where),
        "linear": Entry(ops.linear.RULE, linear), "addmm": Entry(ops.linear.RULE, addmm),
        "mm": _PRODUCT, "bmm": _PRODUCT, "matmul": _PRODUCT,
        "convolution": Entry(ops.conv.RULE, convolution),
        "_native_batch_norm_legit_no_training": Entry(ops.batchnorm.RULE, batch_norm),
        "native_layer_norm": Entry(ops.layernorm.RULE, layer_norm), "rms_norm": Entry(ops.rmsnorm.RULE, layer_norm),
        "native_group_norm": Entry(ops.groupnorm.RULE, group_norm),
        "max_pool2d_with_indices": _POOL_MAX, "max_pool1d": _POOL_MAX, "max_pool2d": _POOL_MAX, "avg_pool1d": _POOL_AVG, "avg_pool2d": _POOL_AVG,
        "adaptive_avg_pool1d": _ADAPTIVE, "adaptive_avg_pool2d": _ADAPTIVE, "_adaptive_avg_pool2d": _ADAPTIVE,
        "constant_pad_nd": Entry(ops.pad.RULE, pad), **{name: _UPSAMPLE for name in ("upsample_nearest1d",
                                                                                     "upsample_nearest2d",
                                                                                     "upsample_linear1d",
                                                                                     "upsample_bilinear2d")},
        "roll": Entry(ops.roll.RULE, roll), "_softmax": Entry(ops.softmax.RULE, softmax),
        "scaled_dot_product_attention": Entry(ops.matmul.RULE, attention), **_activations()}
#: F.normalize's pattern (:mod:`.aten_normalize`): a vector norm inside it, and clamp, expand, div read as it.
ATEN.update({"linalg_vector_norm": VECTOR_NORM, **{name: or_normalize(ATEN[name]) for name in ("clamp", "expand",
                                                                                               "div")}})


def supported():
    """The supported ATen ops, as a refusal lists them."""
    return ", ".join(sorted(ATEN))
