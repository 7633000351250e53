"""Converters of the ONNX importer's table (:data:`.onnx_graph.OPS`) kept out of :mod:`.onnx_graph`: each
``convert(reader, node, label, attrs, rule)`` adds the node of the op ``rule`` or refuses, naming the node."""

import numpy as np

from .. import ops
from .builder import refuse


def _ints(attrs, key, n_axes, default):
    """Attribute ``key`` as a tuple of ``n_axes`` ints (``default`` on every axis when it is absent)."""
    return tuple(int(v) for v in attrs.get(key, [default] * n_axes))


def conv_transpose(reader, node, label, attrs, rule):
    """``ConvTranspose`` with explicit symmetric ``pads`` (``auto_pad`` NOTSET) and no ``output_shape``."""
    if "output_shape" in attrs:
        raise refuse(label, node.op_type, "output_shape is not supported (its padding depends on auto_pad's "
                                          "rounding); export with pads and output_padding instead")
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto != "NOTSET":
        raise refuse(label, node.op_type, f"auto_pad={auto!r}; only auto_pad NOTSET with explicit pads is supported")
    W = reader.constant(node, node.input[1], label, "weight")
    group = int(attrs.get("group", 1))
    bias = (reader.constant(node, node.input[2], label, "bias") if len(node.input) > 2 and node.input[2]
            else np.zeros(W.shape[1] * group))
    kernel = tuple(attrs.get("kernel_shape", W.shape[2:]))
    if kernel != W.shape[2:]:
        raise refuse(label, node.op_type, f"its kernel_shape {list(kernel)} contradicts its weight of shape "
                                          f"{list(W.shape)} (the file contradicts itself)")
    n_axes = len(kernel)
    pads = _ints(attrs, "pads", 2 * n_axes, 0)
    if pads[:n_axes] != pads[n_axes:]:
        raise refuse(label, node.op_type, f"pads {list(pads)} begin and end differently: only symmetric padding "
                                          "is supported")
    window = {"stride": _ints(attrs, "strides", n_axes, 1), "padding": pads[:n_axes],
              "output_padding": _ints(attrs, "output_padding", n_axes, 0),
              "dilation": _ints(attrs, "dilations", n_axes, 1), "groups": group}
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], window, {"weight": W, "bias": bias})


#: Batch sizes at which shape arithmetic is evaluated: a reshape must keep the batch axis at both.
BATCHES = (2, 3)

#: Resize's coordinate transformations and nearest modes that copy entry ``q // scale`` for integer scales.
NEAREST = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
           ("pytorch_half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil")}
#: Resize's coordinate transformations of a linear upsampling by integer factors, by PyTorch's ``align_corners``
#: they equal (half-pixel centres clamped at the edges, or the corners aligned).
LINEAR = {"half_pixel": False, "pytorch_half_pixel": False, "align_corners": True}


def int_input(reader, node, label, index, what):
    """The integers of input ``index`` (a constant, or shape arithmetic equal for every batch), or None if absent."""
    if len(node.input) <= index or not node.input[index]:
        return None
    name = node.input[index]
    if name in reader.sizes and len({tuple(v.reshape(-1)) for v in reader.sizes[name].values()}) == 1:
        return tuple(int(a) for a in reader.sizes[name][BATCHES[0]].reshape(-1))
    if name not in reader.constants:
        raise refuse(label, node.op_type, f"its {what} {name!r} is computed from values, not a constant")
    return tuple(int(a) for a in np.asarray(reader.constants[name]).reshape(-1))


def _scales(reader, node, label, attrs, old):
    """Every axis' scale (batch and channels included) from the attribute, the scales input or the sizes."""
    at = 1 if old else 2
    scales = attrs.get("scales")
    if scales is None and len(node.input) > at and node.input[at]:
        scales = reader.constant(node, node.input[at], label, "scales").reshape(-1)
    if scales is None or len(scales) == 0:
        sizes = int_input(reader, node, label, 3, "sizes")
        scales = [1.0] + [o / i for o, i in zip(sizes[1:], reader.builder.shape(node.input[0]))]
    return [float(s) for s in scales]


def resize(reader, node, label, attrs, rule):
    """Resize (or Upsample, or Resize at opset 10: asymmetric) by integer factors of the spatial axes: nearest
    (a copy of entry ``q // scale``) or linear (half-pixel centres, or aligned corners)."""
    text = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    old = node.op_type == "Upsample" or len(node.input) == 2
    mode = text.get("mode", "nearest")
    coordinates = "asymmetric" if old else text.get("coordinate_transformation_mode", "half_pixel")
    rounding = "floor" if old else text.get("nearest_mode", "round_prefer_floor")
    scales = _scales(reader, node, label, attrs, old)
    integer = scales[:2] == [1.0, 1.0] and all(s == int(s) >= 1 for s in scales[2:])
    if integer and mode == "nearest" and (coordinates, rounding) in NEAREST:
        how = {"mode": "nearest", "align_corners": False}
    elif integer and mode == "linear" and coordinates in LINEAR:
        how = {"mode": "linear", "align_corners": LINEAR[coordinates]}
    else:
        raise refuse(label, node.op_type, f"mode={mode!r}, {(coordinates, rounding)}, scales={scales}: only "
                                          "upsampling of the spatial axes by integer factors, nearest (asymmetric "
                                          "with floor, or half-pixel rounding) or linear (half_pixel, "
                                          "pytorch_half_pixel or align_corners), is supported")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {"scale": tuple(int(s) for s in scales[2:]), **how})


def pad_axes(reader, label, rule, key, parent, pairs):
    """``key``: ``parent`` zero-padded by ``pairs`` (before, after) per per-sample axis, one of which is not padded.

    The pad op pads the axes after the first (channels first).  Where the first is padded (channels last:
    Swin's windows), the last unpadded axis is moved first around the padding (permute, pad, permute back:
    :func:`~sheaflinalg.network.ops.pad.around_unpadded_axis`).
    """
    if not any(p for pair in pairs for p in pair):
        return reader.builder.elide(key, parent)
    order, pads = ops.pad.around_unpadded_axis(pairs)
    if order is None:
        return reader.builder.add(key, label, rule.name, [parent], {"pads": pads})
    moved, padded = f"{key}/moved", f"{key}/padded"
    reader.builder.add(moved, label, ops.permute.RULE.name, [parent], {"axes": order})
    reader.builder.add(padded, label, rule.name, [moved], {"pads": pads})
    reader.builder.add(key, label, ops.permute.RULE.name, [padded], {"axes": tuple(int(a) for a in np.argsort(order))})
