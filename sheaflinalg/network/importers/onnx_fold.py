"""Constants computed in an ONNX file: a node reading constants only computes constants, evaluated once.

torch.onnx writes a module's buffers as initializers and what ``forward`` computes from them as nodes: Swin
V2's relative-position bias is a small MLP (``cpb_mlp``: MatMul, Add, Relu, MatMul) on its constant
coordinate table, gathered by a constant index, reshaped, transposed and squashed by a sigmoid.  Such a node
is no part of the network: :func:`is_constant` says which nodes read initializers and constants alone, and
:func:`fold` runs one through onnx's reference evaluator in float64 and records its outputs as constants
(``reader.constants``), which the converters read as any initializer.  Shape arithmetic, which reads the
input's size, is :mod:`.onnx_sizes`'.
"""

import numpy as np

from .builder import refuse

#: op_types never folded: nodes without inputs (Constant is a converter's; random generators are not constant).
NOT_FOLDED = ("Constant", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
              "Bernoulli")


def is_constant(reader, node):
    """Whether ``node`` computes constants: it has inputs, and each is a constant of the file.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from onnx import helper
    >>> reader = SimpleNamespace(constants={"w": np.ones(2), "t": np.ones(2)})
    >>> is_constant(reader, helper.make_node("MatMul", ["t", "w"], ["y"]))
    True
    >>> is_constant(reader, helper.make_node("MatMul", ["x", "w"], ["y"]))
    False
    """
    names = [name for name in node.input if name]
    return node.op_type not in NOT_FOLDED and bool(names) and all(name in reader.constants for name in names)


def _as_float64(array):
    array = np.asarray(array)
    return array.astype(np.float64) if array.dtype.kind == "f" else array


def fold(reader, node, label, attrs, rule):
    """Evaluate the constant ``node`` (:func:`is_constant`) in float64 and record its outputs as constants."""
    from onnx.reference import ReferenceEvaluator

    helper = reader.onnx.helper
    names = [name for name in node.input if name]
    inputs = [reader.helper.from_array(_as_float64(reader.constants[name]), name) for name in names]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "fold", [], outputs, initializer=inputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", reader.opset)])
    try:
        values = ReferenceEvaluator(model).run(None, {})
    except Exception as exc:         # the evaluator's own message says what it cannot compute
        raise refuse(label, node.op_type, f"it reads constants only, and onnx's reference evaluator cannot "
                                          f"compute it ({type(exc).__name__}: {str(exc)[:200]})") from None
    for name, value in zip([name for name in node.output if name], values):
        reader.constants[name] = _as_float64(value)
