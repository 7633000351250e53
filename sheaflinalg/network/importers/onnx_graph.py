"""ONNX files as graph networks, through the ``onnx`` package (protobuf: nothing is unpickled).

The file is read, its external data from its own directory only
(:mod:`.onnx_data`), checked by ``onnx.checker`` and its opset and single
input and output checked; then its nodes are converted in order, each refused
with its name and op_type if it has no counterpart.  Parameters must be
initializers (or Constant nodes); they are read with ``onnx.numpy_helper`` and
converted to float64 (bfloat16 and the float8 types exactly).  What every
supported op_type becomes is the one table :data:`OPS` (op_type -> the op's
rule and its converter, handed the rule: no converter writes an op name).
Last, the file
runs once in float64 on a random input (``onnx.reference``) and the graph
built is checked against it value by value (:mod:`.check`).
"""

import math
import os

import numpy as np

from ..._common.validation import check_path
from .. import ops
from ..errors import UnsupportedModelError
from ..graph.nodes import INPUT
from . import batch_layout, onnx_affine, onnx_einsum, onnx_fold, onnx_layout, onnx_sizes
from .batch_layout import STANDARD
from .builder import Entry, GraphBuilder, fold_batchnorm, or_list, refuse
from .check import check_import, random_input
from .onnx_activations import OPS as ACTIVATIONS
from .onnx_data import inline_external_data, run_reference, tensor_array
from .onnx_norms import (decomposed_hint, group_normalization, instance_normalization, layer_normalization,
                         lp_normalization)
from .onnx_ops import BATCHES, conv_transpose, int_input, pad_axes, resize
from .onnx_patterns import fuse
from .onnx_products import add, matmul, scale, softmax

_FLOATS = (1, 10, 11, 16)            # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
MIN_OPSET = 7


def _import_onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:  # pragma: no cover - exercised only without onnx
        raise ImportError("Network.from_onnx needs the onnx package (pip install onnx, or the 'import' "
                          "extra: pip install sheaflinalg[import])") from exc
    return onnx, numpy_helper


def _load(onnx, path):
    """The checked ModelProto of ``path`` (ValueError naming the file if it is not one)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:     # DecodeError, ...: the file is not a model
        raise ValueError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {str(exc)[:300]})") from None
    inline_external_data(onnx, path, model)      # from the model's own directory only, before anything reads it
    try:
        onnx.checker.check_model(model)
    except Exception as exc:     # ValidationError, ...: the file is not a valid model
        raise ValueError(f"{path}: not a valid ONNX model ({type(exc).__name__}: {str(exc)[:300]})") from None
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    newest = onnx.defs.onnx_opset_version()
    opset = opsets.get("ai.onnx")
    if opset is None or not MIN_OPSET <= opset <= newest:
        raise ValueError(f"{path}: unsupported opset {opset} (supported: {MIN_OPSET} to {newest}, the installed "
                         "onnx's newest)")
    return model, opset


def _input_shape(onnx, path, graph, constants):
    inputs = [i for i in graph.input if i.name not in constants]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise ValueError(f"{path}: the model has {len(inputs)} input(s) and {len(graph.output)} output(s); "
                         "exactly one of each is supported")
    (value,) = inputs
    tensor = value.type.tensor_type
    if value.type.WhichOneof("value") != "tensor_type" or tensor.elem_type not in _FLOATS:
        raise ValueError(f"{path}: input {value.name!r} is not a floating-point tensor")
    dims = [d.dim_value if d.WhichOneof("value") == "dim_value" else None for d in tensor.shape.dim]
    if len(dims) < 2 or not all(isinstance(n, int) and n >= 1 for n in dims[1:]):
        shown = [d.dim_value or d.dim_param or "?" for d in tensor.shape.dim]
        raise ValueError(f"{path}: input {value.name!r} has shape {shown}; expected (batch, fixed per-sample "
                         "sizes): dynamic shapes other than the batch axis cannot be resolved")
    return value.name, tuple(dims[1:]), dims[0]


class _Reader:
    """The file's constants, the values its nodes consume, and the graph being built."""

    def __init__(self, onnx, numpy_helper, path, model, opset):
        self.onnx, self.helper, self.path, self.opset = onnx, numpy_helper, path, opset
        graph = model.graph
        self.constants = {t.name: tensor_array(onnx, numpy_helper, t) for t in graph.initializer}
        self.input_name, input_shape, self.batch = _input_shape(onnx, path, graph, self.constants)
        self.sizes = {}            # shape arithmetic: {tensor name: {batch: array}} (onnx_sizes)
        self.builder = GraphBuilder(input_shape, self.input_name)
        self.output_name = graph.output[0].name
        self.consumers, self.readers = {}, {}      # {value: how many nodes read it}, {value: their op_types}
        for node in graph.node:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
                self.readers.setdefault(name, []).append(node.op_type)
        self.consumers[self.output_name] = self.consumers.get(self.output_name, 0) + 1
        self.matmuls = set()       # MatMul outputs still without a bias
        self.products = {}         # {output: alpha} of MatMuls of two values (a scalar after them scales them)
        self.causal = set()        # scores with attention's causal mask added: their Softmax's causal
        self.layouts = {}          # {value: where its samples sit} where not the first axis alone (onnx_layout)

    def attrs(self, node):
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

    def constant(self, node, name, label, what):
        """The initializer ``name`` as a float64 array (refusal if it is computed by the network)."""
        if name not in self.constants:
            raise refuse(label, node.op_type, f"its {what} {name!r} is computed, not a constant initializer")
        value = self.constants[name]
        if not np.issubdtype(value.dtype, np.floating):
            raise refuse(label, node.op_type, f"its {what} {name!r} has dtype {value.dtype}, not floating point")
        return np.asarray(value, dtype=np.float64)

    def only_first_output(self, node, label):
        if any(self.consumers.get(name) for name in node.output[1:] if name):
            raise refuse(label, node.op_type, "only its first output may be used")


def _pads(node, label, attrs, n_axes, in_spatial, kernel, stride, dilation):
    """Symmetric per-axis zero padding from ``pads`` / ``auto_pad`` (refusal if it is uneven)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max((math.ceil(n / s) - 1) * s + d * (k - 1) + 1 - n, 0)
                 for n, k, s, d in zip(in_spatial, kernel, stride, dilation)]
        begin, end = [t // 2 for t in total], [t - t // 2 for t in total]
    elif auto == "VALID":
        begin = end = [0] * n_axes
    else:
        pads = list(attrs.get("pads", [0] * 2 * n_axes))
        begin, end = pads[:n_axes], pads[n_axes:]
    if list(begin) != list(end):
        raise refuse(label, node.op_type, f"padding begins {list(begin)} and ends {list(end)}: only symmetric "
                                          "padding is supported")
    return tuple(int(p) for p in begin)


def _window(reader, node, label, attrs, kernel):
    """``{stride, padding, dilation}`` of a Conv or pooling node."""
    n_axes = len(kernel)
    stride = tuple(attrs.get("strides", [1] * n_axes))
    dilation = tuple(attrs.get("dilations", [1] * n_axes))
    in_spatial = reader.builder.shape(node.input[0])[1:]
    padding = _pads(node, label, attrs, n_axes, in_spatial, kernel, stride, dilation)
    return {"stride": stride, "padding": padding, "dilation": dilation}


def _conv(reader, node, label, attrs, rule):
    W = reader.constant(node, node.input[1], label, "weight")
    bias = (reader.constant(node, node.input[2], label, "bias") if len(node.input) > 2 and node.input[2]
            else np.zeros(W.shape[0]))
    kernel = tuple(attrs.get("kernel_shape", W.shape[2:]))
    if kernel != W.shape[2:]:
        raise refuse(label, node.op_type, f"its kernel_shape {list(kernel)} contradicts its weight of shape "
                                          f"{list(W.shape)} (the file contradicts itself)")
    window = _window(reader, node, label, attrs, kernel)
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {**window, "groups": int(attrs.get("group", 1))}, {"weight": W, "bias": bias})


def _pool_window(reader, node, label, attrs):
    """``{kernel_size, stride, padding, dilation}`` of a pooling node (whose other outputs are unused)."""
    reader.only_first_output(node, label)
    kernel = tuple(attrs["kernel_shape"])
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    if ceil_mode and attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise refuse(label, node.op_type, "ceil_mode=1 with auto_pad is not supported (give explicit pads)")
    return {**_window(reader, node, label, attrs, kernel), "kernel_size": kernel, "ceil_mode": ceil_mode}


def _maxpool(reader, node, label, attrs, rule):
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], _pool_window(reader, node, label, attrs))


def _avgpool(reader, node, label, attrs, rule):
    window = _pool_window(reader, node, label, attrs)
    if any(d != 1 for d in window.pop("dilation")):
        raise refuse(label, node.op_type, "dilated average pooling is not supported")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {**window, "count_include_pad": bool(attrs.get("count_include_pad", 0))})


def _global_pool(reader, node, label, attrs, rule):
    n_axes = len(reader.builder.shape(node.input[0])) - 1
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"output_size": (1,) * n_axes})


def _batchnorm(reader, node, label, attrs, rule):
    reader.only_first_output(node, label)
    if attrs.get("training_mode", 0) or not attrs.get("spatial", 1):
        raise refuse(label, node.op_type, "training_mode=1 or spatial=0 is not supported (eval mode, per channel)")
    gamma, beta, mean, var = (reader.constant(node, name, label, what) for name, what in
                              zip(node.input[1:5], ("scale", "B", "input_mean", "input_var")))
    scale, shift = fold_batchnorm(label, node.op_type, gamma, beta, mean, var, attrs.get("epsilon", 1e-5))
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], params={"scale": scale, "shift": shift})


def _batch_axis(reader, node, label, axis):
    """Axis ``axis`` of ``node``'s first input (an ONNX axis, the batch's included) as a per-sample one, wherever
    that input holds its samples (:mod:`.onnx_layout`); refused for the samples' own axis."""
    x = node.input[0]
    rank = len(onnx_layout.full_shape(reader, x, 1))
    if onnx_layout.layout(reader, x) != STANDARD:
        return batch_layout.axis(onnx_layout.layout(reader, x), label, node.op_type, axis, rank)
    if not -rank <= axis < rank or axis % rank == 0:
        raise refuse(label, node.op_type, f"axis={axis} is the batch axis (or out of range for rank {rank}); only "
                                          "per-sample axes are supported")
    return axis % rank - 1


def _concat(reader, node, label, attrs, rule):
    axis = _batch_axis(reader, node, label, int(attrs["axis"]))
    reader.builder.add(node.output[0], label, rule.name, list(node.input), {"axis": axis})


def _flatten(reader, node, label, attrs, rule):
    shape = reader.builder.shape(node.input[0])
    if _batch_axis(reader, node, label, int(attrs.get("axis", 1))) != 0:
        raise refuse(label, node.op_type, f"axis={attrs['axis']} mixes the batch with the features; only axis=1 "
                                          "is supported")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"shape": (math.prod(shape),)})


def _dropout(reader, node, label, attrs, rule):
    reader.only_first_output(node, label)
    if len(node.input) > 2 and node.input[2]:
        mode = reader.constants.get(node.input[2])
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            raise refuse(label, node.op_type, "training_mode is not a constant false; dropout must be in eval mode")
    reader.builder.elide(node.output[0], node.input[0])


def _constant(reader, node, label, attrs, rule):
    if "value" not in attrs:
        raise refuse(label, node.op_type, f"only a tensor 'value' is supported, got {sorted(attrs)}")
    reader.constants[node.output[0]] = tensor_array(reader.onnx, reader.helper, attrs["value"])


def _relu(reader, node, label, attrs, rule):
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]])


def _leaky_relu(reader, node, label, attrs, rule):
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"negative_slope": float(attrs.get("alpha",
                                                                                                             0.01))})


def _identity(reader, node, label, attrs, rule):
    """A value passed on, or a constant under a second name (torch.onnx writes equal parameters once)."""
    if node.input[0] in reader.constants:
        reader.constants[node.output[0]] = reader.constants[node.input[0]]
        return
    reader.builder.elide(node.output[0], node.input[0])


def _reduce_mean(reader, node, label, attrs, rule):
    axes = attrs.get("axes", int_input(reader, node, label, 1, "axes"))
    if not axes and attrs.get("noop_with_empty_axes", 0):
        return reader.builder.elide(node.output[0], node.input[0])
    if not axes:
        raise refuse(label, node.op_type, "without axes it reduces over the batch axis too; give per-sample axes")
    axes = tuple(sorted({_batch_axis(reader, node, label, int(a)) for a in axes}))
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]],
                       {"axes": axes, "keepdim": bool(attrs.get("keepdims", 1))})


def _pad(reader, node, label, attrs, rule):
    mode = attrs.get("mode", b"constant")
    value = attrs.get("value", 0.0)
    if len(node.input) > 2 and node.input[2]:
        value = float(reader.constant(node, node.input[2], label, "constant_value").reshape(-1)[0])
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant" or value != 0:
        raise refuse(label, node.op_type, f"mode={mode!r}, value={value!r}; only zero padding is supported")
    shape = reader.builder.shape(node.input[0])
    rank = len(shape) + 1
    axes = int_input(reader, node, label, 3, "axes") or tuple(range(rank))
    pads = tuple(int(p) for p in attrs["pads"]) if "pads" in attrs else int_input(reader, node, label, 1, "pads")
    per_axis = [(0, 0)] * rank
    for k, a in enumerate(axes):
        per_axis[a % rank] = (pads[k], pads[k + len(axes)])
    if any(p < 0 for pair in per_axis for p in pair) or per_axis[0] != (0, 0) or (0, 0) not in per_axis[1:]:
        raise refuse(label, node.op_type, f"pads={list(pads)} pad the batch axis or every per-sample axis or crop "
                                          "(negative); only zero padding leaving one per-sample axis is supported")
    pad_axes(reader, label, rule, node.output[0], node.input[0], per_axis[1:])


def _add_ranges(reader, node, label, rule, key, parent, ranges):
    """Slice nodes computing ``key`` from ``parent``: one per ``(axis, start, stop, step)`` not the whole axis."""
    shape = reader.builder.shape(parent)
    kept = []
    for a, b, e, s in ranges:
        axis = _batch_axis(reader, node, label, a)
        start, stop, step = slice(b, e, s).indices(shape[axis]) if s >= 1 else (b, e, s)
        if step < 1 or stop <= start:
            raise refuse(label, node.op_type, f"the range {b}:{e}:{s} of axis {a} is empty or steps backwards; "
                                              "only non-empty slices with steps >= 1 are supported")
        if (start, stop, step) != (0, shape[axis], 1):
            kept.append((axis, start, stop, step))
    ranges = kept
    if not ranges:
        return reader.builder.elide(key, parent)
    for k, (axis, start, stop, step) in enumerate(ranges):
        out = key if k == len(ranges) - 1 else f"{key}/axis{axis}"
        reader.builder.add(out, label, rule.name, [parent],
                           {"axis": axis, "start": start, "stop": stop, "step": step})
        parent = out


def _slice(reader, node, label, attrs, rule):
    starts = attrs.get("starts", int_input(reader, node, label, 1, "starts"))
    ends = attrs.get("ends", int_input(reader, node, label, 2, "ends"))
    axes = attrs.get("axes", int_input(reader, node, label, 3, "axes")) or range(len(starts))
    steps = int_input(reader, node, label, 4, "steps") or (1,) * len(starts)
    _add_ranges(reader, node, label, rule, node.output[0], node.input[0],
                [tuple(int(v) for v in r) for r in zip(axes, starts, ends, steps)])


def _split(reader, node, label, attrs, rule):
    shape = reader.builder.shape(node.input[0])
    axis = int(attrs.get("axis", 0))
    length = shape[_batch_axis(reader, node, label, axis)]
    sizes = attrs.get("split", int_input(reader, node, label, 1, "split"))
    if sizes is None:
        part = -(-length // len(node.output))
        sizes = [min(part, length - k * part) for k in range(len(node.output))]
    if sum(sizes) != length or len(sizes) != len(node.output) or min(sizes) < 1:
        raise refuse(label, node.op_type, f"split={list(sizes)} does not cut the {length} entries of axis {axis} "
                                          f"into {len(node.output)} non-empty parts")
    for key, start, size in zip(node.output, np.cumsum([0] + list(sizes)), sizes):
        _add_ranges(reader, node, label, rule, key, node.input[0], [(axis, int(start), int(start + size), 1)])


#: The ONNX importer's one table: ``{op_type: Entry(rule, convert)}``, ``convert(reader, node, label, attrs,
#: rule)`` adding the node of the op ``rule`` (None: a value elided into its input, or a constant).
OPS = {"Gemm": Entry(ops.linear.RULE, onnx_affine.gemm), "MatMul": Entry(ops.matmul.RULE, matmul),
       "Einsum": Entry(ops.matmul.RULE, onnx_einsum.einsum),
       "Add": Entry(ops.add.RULE, add), "Sub": Entry(ops.affine.RULE, onnx_affine.affine),
       "Mul": Entry(ops.mul.RULE, scale), "Div": Entry(ops.affine.RULE, scale),
       "Expand": Entry(ops.constant.RULE, onnx_affine.expand), "Tile": Entry(ops.constant.RULE, onnx_affine.tile),
       "Conv": Entry(ops.conv.RULE, _conv),
       "MaxPool": Entry(ops.maxpool.RULE, _maxpool), "AveragePool": Entry(ops.avgpool.RULE, _avgpool),
       "GlobalAveragePool": Entry(ops.adaptive_avgpool.RULE, _global_pool),
       "BatchNormalization": Entry(ops.batchnorm.RULE, _batchnorm), "Concat": Entry(ops.concat.RULE, _concat),
       "Flatten": Entry(ops.reshape.RULE, _flatten), "Reshape": Entry(ops.reshape.RULE, onnx_layout.reshape),
       "Unsqueeze": Entry(ops.reshape.RULE, onnx_layout.unsqueeze),
       "Squeeze": Entry(ops.reshape.RULE, onnx_layout.squeeze), "Gather": Entry(ops.slice.RULE, onnx_layout.gather),
       "Relu": Entry(ops.relu.RULE, _relu), "LeakyRelu": Entry(ops.leaky_relu.RULE, _leaky_relu),
       "Dropout": Entry(None, _dropout), "Identity": Entry(None, _identity), "Constant": Entry(None, _constant),
       "Transpose": Entry(ops.permute.RULE, onnx_layout.transpose), "ReduceMean": Entry(ops.mean.RULE, _reduce_mean),
       "ReduceSum": Entry(ops.sum.RULE, _reduce_mean),
       "Pad": Entry(ops.pad.RULE, _pad), "Slice": Entry(ops.slice.RULE, _slice),
       "Split": Entry(ops.slice.RULE, _split), "Resize": Entry(ops.upsample.RULE, resize),
       "Upsample": Entry(ops.upsample.RULE, resize), "ConvTranspose": Entry(ops.conv_transpose.RULE, conv_transpose),
       "LayerNormalization": Entry(ops.layernorm.RULE, layer_normalization),
       "RMSNormalization": Entry(ops.rmsnorm.RULE, layer_normalization),
       "LpNormalization": Entry(ops.normalize.RULE, lp_normalization),
       "GroupNormalization": Entry(ops.groupnorm.RULE, group_normalization),
       "InstanceNormalization": Entry(ops.groupnorm.RULE, instance_normalization),
       "Softmax": Entry(ops.softmax.RULE, softmax), **ACTIVATIONS}
#: ``{op_type: output activation}`` of the activations read as the output activation at the end (inside: nodes).
FINALS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Softmax": "softmax"}


def supported():
    """What the importer supports, read off :data:`OPS` and :data:`FINALS` (listed by the refusal of an op_type).

    Examples
    --------
    >>> supported()[:40]
    'Add, AveragePool, BatchNormalization, Cl'
    """
    return f"{', '.join(sorted(OPS))} and a final {or_list(FINALS)}"


def _final(reader, node, label, attrs):
    """The output activation of the node computing the graph's output, or None if it is not one."""
    kind = FINALS.get(node.op_type)
    if kind is None:
        return None
    if node.output[0] != reader.output_name:
        if node.op_type in OPS:         # an interior Sigmoid, Tanh or Softmax is a node
            return None
        raise refuse(label, node.op_type, f"{kind} is supported only as the output activation (the last node)")
    if kind == "softmax":
        rank = len(reader.builder.shape(node.input[0])) + 1
        axis = int(attrs.get("axis", 1 if reader.opset < 13 else -1))
        if rank != 2 or axis not in (1, -1):
            raise refuse(label, node.op_type, f"softmax over axis {axis} of a rank-{rank} value; only a softmax "
                                              "over the features of a flat output is supported")
    return kind


def _entry(reader, node):
    """The table entry converting ``node``: shape arithmetic, a constant computed from constants, or its op's."""
    if onnx_sizes.is_size(reader, node):
        return Entry(None, onnx_sizes.evaluate)
    return Entry(None, onnx_fold.fold) if onnx_fold.is_constant(reader, node) else OPS.get(node.op_type)


def graph_from_onnx(path):
    """The :class:`~sheaflinalg.network.graph.Graph` of an ONNX file (see ``Network.from_onnx``)."""
    path = check_path(path, "path")
    onnx, numpy_helper = _import_onnx()
    model, opset = _load(onnx, path)
    reader = _Reader(onnx, numpy_helper, path, model, opset)
    output, result = "identity", reader.output_name
    for i, node in enumerate(fuse(reader, model.graph.node)):      # an activation's subgraph as one node
        label = (node.name or (node.output[0] if node.output else "") or f"{node.op_type}_{i}").strip("/")
        label = label.replace("/", ".")       # torch.onnx names nodes after module paths: /layer1/conv/Conv
        if node.domain not in ("", "ai.onnx"):
            raise refuse(label, f"{node.domain}.{node.op_type}", "operations outside the default ONNX domain are "
                                                                 "not supported")
        attrs = reader.attrs(node)
        try:
            kind = _final(reader, node, label, attrs)
        except UnsupportedModelError as exc:
            raise UnsupportedModelError(f"{path}: {exc}") from None
        if kind is not None:
            output, result = kind, node.input[0]
            continue
        entry = _entry(reader, node)
        if entry is None:
            raise refuse(label, node.op_type, f"op_type {node.op_type!r} has no sparse restriction map"
                                              f"{decomposed_hint(model.graph, node)}; supported: {supported()}")
        try:
            onnx_layout.convert(reader, node, label, attrs, entry)
        except UnsupportedModelError as exc:      # (a Sub of two values: perhaps a LayerNorm written out)
            raise UnsupportedModelError(f"{path}: {exc}{decomposed_hint(model.graph, node)}") from None
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise UnsupportedModelError(f"{path}: node {label!r} ({node.op_type}) is not supported: {exc}") from None
    try:
        if onnx_layout.layout(reader, result) != onnx_layout.STANDARD:
            raise UnsupportedModelError(f"the output {result!r} holds the samples of the batch in axis "
                                        f"{onnx_layout.layout(reader, result).dim} (moved there by a Transpose or "
                                        "Reshape); only an output with the batch first and alone is supported")
        graph = reader.builder.graph(result, output)
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(f"{path}: {exc}") from None
    _check(reader, model, graph)
    return graph


def _check(reader, model, graph):
    """Run the file once in float64 (onnx's reference evaluator) and check ``graph`` against it, value by value."""
    batch = reader.batch or BATCHES[0]
    X = random_input(batch, graph.input_shape)
    values = run_reference(reader.onnx, reader.helper, reader.path, model, reader.input_name, X)
    reference = {name: onnx_layout.layout(reader, key).samples(values[key], batch)
                 for name, key in reader.builder.sources.items() if name != INPUT and values.get(key) is not None}
    check_import(graph, X, reference, values[reader.output_name], reader.path,
                 "an attribute or a broadcast the importer reads otherwise than the ONNX operator does")
