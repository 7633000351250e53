"""The tensors of an ONNX file: external data read from the model's own directory only, floating-point
tensors of every ONNX float type as float64, and the model run once in float64 by onnx's reference evaluator.

A tensor stored outside the file names a ``location``; it is read only if
that location, resolved (``..`` and symbolic links followed), is a regular
file inside the directory of the model file itself: an absolute path or a
path leaving the directory is refused before anything is read.  The data is
then inlined into the model, so nothing reads another file afterwards (not
``onnx.checker``, not ``numpy_helper``, not the reference evaluator).
"""

import os

import numpy as np

from ..._common.memory import check_memory
from ..errors import UnsupportedModelError


def _tensors(onnx, graph):
    """Every TensorProto of ``graph``: initializers, sparse initializers, node attributes and subgraphs'."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    kinds = onnx.AttributeProto
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == kinds.TENSOR:
                yield attr.t
            elif attr.type == kinds.TENSORS:
                yield from attr.tensors
            elif attr.type == kinds.SPARSE_TENSOR:
                yield from (attr.sparse_tensor.values, attr.sparse_tensor.indices)
            elif attr.type in (kinds.GRAPH, kinds.GRAPHS):
                for subgraph in ([attr.g] if attr.type == kinds.GRAPH else attr.graphs):
                    yield from _tensors(onnx, subgraph)


def _external_file(path, tensor, location):
    """The resolved file of ``location``, refused unless it is a regular file inside ``path``'s directory."""
    where = f"{path}: tensor {tensor.name!r} is stored in {location!r}"
    if not location or os.path.isabs(location) or os.path.splitdrive(location)[0]:
        raise ValueError(f"{where}, not a path relative to the model's directory: external data is read only from "
                         "the model's own directory")
    base = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    target = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, target]) != base:
        raise ValueError(f"{where}, which leads outside the model's own directory {base} (through '..' or a "
                         "symbolic link): external data is read only from the model's own directory")
    if not os.path.isfile(target):
        raise ValueError(f"{where}, which is not a file in the model's own directory")
    return target


def _read_external(path, tensor):
    """Read ``tensor``'s external data (checked location, offset and length) into the tensor itself."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    target = _external_file(path, tensor, info.get("location", ""))
    size = os.path.getsize(target)
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError:
        raise ValueError(f"{path}: tensor {tensor.name!r}: its external data offset {info.get('offset')!r} or "
                         f"length {info.get('length')!r} is not an integer") from None
    if offset < 0 or length < 0 or offset + length > size:
        raise ValueError(f"{path}: tensor {tensor.name!r}: its external data (offset {offset}, length {length}) "
                         f"is not inside {info['location']!r} ({size} bytes)")
    check_memory(length, f"the external data of tensor {tensor.name!r}", "check the file")
    with open(target, "rb") as file:
        file.seek(offset)
        tensor.raw_data = file.read(length)
    del tensor.external_data[:]
    tensor.data_location = tensor.DEFAULT


def inline_external_data(onnx, path, model):
    """Read every tensor ``model`` (loaded from ``path`` without its external data) stores in another file,
    from ``path``'s own directory only; ValueError naming the file, the tensor and the location otherwise."""
    for tensor in _tensors(onnx, model.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            _read_external(path, tensor)


def is_float_type(onnx, data_type):
    """Whether an ONNX element type is a floating-point one (float, double, float16, bfloat16, float8, ...).

    Examples
    --------
    >>> import onnx
    >>> is_float_type(onnx, onnx.TensorProto.BFLOAT16), is_float_type(onnx, onnx.TensorProto.INT64)
    (True, False)
    """
    return onnx.TensorProto.DataType.Name(data_type).startswith(("FLOAT", "DOUBLE", "BFLOAT"))


def tensor_array(onnx, numpy_helper, tensor):
    """A TensorProto as an ndarray; floating-point types numpy does not have (bfloat16, float8, float4)
    become float64, exactly (every value of theirs is a float64)."""
    array = numpy_helper.to_array(tensor)
    if is_float_type(onnx, tensor.data_type) and not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    return array


def float64_model(onnx, numpy_helper, model):
    """A copy of ``model`` computing in float64: floating-point tensors, inputs, outputs and casts to a float
    type become double (shape annotations are dropped)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph, double = copy.graph, onnx.TensorProto.DOUBLE
    for tensor in _tensors(onnx, graph):
        if is_float_type(onnx, tensor.data_type) and tensor.data_type != double:
            array = tensor_array(onnx, numpy_helper, tensor).astype(np.float64)
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    for value in (*graph.input, *graph.output):
        if is_float_type(onnx, value.type.tensor_type.elem_type):
            value.type.tensor_type.elem_type = double
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and is_float_type(onnx, attr.i):
                attr.i = double
    del graph.value_info[:]
    _drop_idle_ceil_mode(onnx, graph)
    return copy


def _drop_idle_ceil_mode(onnx, graph):
    """``ceil_mode`` removed from the poolings of ``graph`` that step by 1 on every axis, where rounding the
    window count up or down gives the same size: onnx's reference evaluator (1.23) sizes such a pooling with
    padding as if it were 2 entries larger (GoogLeNet's 3x3 max pools of stride 1, padding 1)."""
    for node in graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type.endswith("Pool") and attrs.get("ceil_mode") and set(attrs.get("strides", [1])) == {1}:
            kept = [a for a in node.attribute if a.name != "ceil_mode"]
            del node.attribute[:]
            node.attribute.extend(kept)


def run_reference(onnx, numpy_helper, path, model, input_name, X):
    """Every value (``{ONNX name: ndarray}``) of ``model`` run in float64 on ``X`` by onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    try:
        evaluator = ReferenceEvaluator(float64_model(onnx, numpy_helper, model))
        return evaluator.run(None, {input_name: X}, intermediate=True)
    except Exception as exc:     # the evaluator's own message says what it cannot run
        raise UnsupportedModelError(f"{path}: onnx's reference evaluator cannot run the model to check the import "
                                    f"({type(exc).__name__}: {str(exc)[:300]})") from None
