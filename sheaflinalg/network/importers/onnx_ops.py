"""Converters of the ONNX importer's table (:data:`.onnx_graph.OPS`) kept out of :mod:`.onnx_graph`: each
``convert(reader, node, label, attrs, rule)`` adds the node of the op ``rule`` or refuses, naming the node."""

import numpy as np

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
