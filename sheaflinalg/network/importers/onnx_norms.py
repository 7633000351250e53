"""The ONNX importer's converters of the normalisations: LayerNormalization (opset 17), RMSNormalization (23),
GroupNormalization (21) and InstanceNormalization (the form torch's
exporter writes a GroupNorm in: a reshape to ``(G, -1)``, one group per row).

Each becomes the normalising node and its affine part (:mod:`.norm_affine`).  A normalisation written out in
elementary operations (torch's exporter below opset 17 writes a LayerNorm as ReduceMean, Sub, Pow, ReduceMean,
Add, Sqrt, Div) is refused with the advice to export at opset 17 or later (:func:`decomposed_hint`).
"""


import numpy as np

from .. import ops
from .builder import Inner, refuse
from .norm_affine import affine_part


def _optional(reader, node, label, index, what):
    """Input ``index`` of ``node`` as a float64 constant, or None where it is absent."""
    if len(node.input) <= index or not node.input[index]:
        return None
    return reader.constant(node, node.input[index], label, what)


def _add(reader, node, label, rule, attrs, scale, shift, per_channel=False):
    """The normalising node of ``rule`` and its affine part, computing ``node``'s first output."""
    reader.only_first_output(node, label)
    x, out = node.input[0], node.output[0]
    after = affine_part(label, node.op_type, reader.builder.shape(x), scale, shift, per_channel)
    key = Inner(f"{out}.{rule.name}") if after else out
    reader.builder.add(key, label, rule.name, [x], attrs)
    if after:
        reader.builder.add(out, f"{label}.affine", after[0].name, [key], {}, after[1])


def _eps(attrs):
    """``epsilon``: a float32 attribute, its default too (1e-5 as float32)."""
    return float(np.float32(attrs.get("epsilon", 1e-5)))


def _trailing(reader, node, label, attrs):
    """``n_axes`` of a normalisation from ``axis`` to the last axis (refusal if that takes in the batch)."""
    rank = len(reader.builder.shape(node.input[0])) + 1
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank or axis % rank == 0:
        raise refuse(label, node.op_type, f"axis={axis} normalises across the batch (or is out of range for rank "
                                          f"{rank}); only per-sample axes are supported")
    return {"n_axes": rank - axis % rank, "eps": _eps(attrs)}


def layer_normalization(reader, node, label, attrs, rule):
    """LayerNormalization (and RMSNormalization, ``rule`` rmsnorm, which has no B): over ``axis`` onwards."""
    shift = None if rule is ops.rmsnorm.RULE else _optional(reader, node, label, 2, "B")
    _add(reader, node, label, rule, _trailing(reader, node, label, attrs),
         _optional(reader, node, label, 1, "Scale"), shift)


def group_normalization(reader, node, label, attrs, rule):
    """GroupNormalization (opset 21: scale and bias per channel; onnx's checker refuses opset 18's form, which
    has them per group)."""
    groups = int(attrs["num_groups"])
    scale, shift = (_optional(reader, node, label, i, what) for i, what in ((1, "scale"), (2, "bias")))
    _add(reader, node, label, rule, {"groups": groups, "eps": _eps(attrs)}, scale, shift,
         per_channel=True)


def instance_normalization(reader, node, label, attrs, rule):
    """InstanceNormalization: every channel over its positions (a group norm of one channel per group)."""
    channels = reader.builder.shape(node.input[0])[0]
    scale, shift = (reader.constant(node, node.input[i], label, what) for i, what in ((1, "scale"), (2, "B")))
    _add(reader, node, label, rule, {"groups": channels, "eps": _eps(attrs)}, scale, shift,
         per_channel=True)


def lp_normalization(reader, node, label, attrs, rule):
    """``F.normalize``'s pattern (:mod:`.onnx_patterns`: LpNormalization with its own ``eps``) over the last axis;
    a file's own LpNormalization, whose norm is not clamped, is refused."""
    rank = len(reader.builder.shape(node.input[0])) + 1
    if "eps" not in attrs or attrs.get("p", 2) != 2 or attrs.get("axis", -1) % rank != rank - 1:
        raise refuse(label, node.op_type, "only F.normalize's pattern (p=2, the last axis, the norm clamped at eps) "
                                          "is supported")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"eps": float(attrs["eps"])})


def decomposed_hint(graph, node):
    """The advice for an unsupported ``node`` that subtracts a ReduceMean of its own first input (a normalisation
    written out by an exporter before opset 17), or an empty string."""
    if node.op_type != "Sub" or len(node.input) != 2:
        return ""
    means = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "ReduceMean" and n.output}
    if means.get(node.input[1]) != node.input[0]:
        return ""
    return (" (it subtracts the mean of its input: a LayerNorm written out in elementary operations, as torch's "
            "exporter does below opset 17; export with opset_version >= 17, which writes LayerNormalization)")
