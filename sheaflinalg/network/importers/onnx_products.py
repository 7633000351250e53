"""The ONNX importer's converters of products of two values and of an interior softmax.

``Mul`` of two computed values becomes a ``mul`` node, ``MatMul`` of two computed values a ``matmul`` node
(with a constant operand they are affine or linear maps: :mod:`.onnx_affine`), and a scalar constant
``Mul`` or ``Div`` right after such a ``MatMul``, read by nothing else, its scale ``alpha`` (attention's
``Q K^T / sqrt(d)`` stays one node).  A ``Softmax`` (``axis``; before opset 13 only over the last axis,
where the old flattening semantics agree) inside the network is a node; at its end the output activation.
Attention's causal mask added to the scores right before such a Softmax (torch.onnx writes
``F.scaled_dot_product_attention(..., is_causal=True)`` so: a constant of shape arithmetic, 0 on and below the
diagonal and ``-inf`` above) is that softmax's ``causal``.
"""

import numpy as np

from .. import ops
from . import onnx_affine
from .builder import refuse


def _rank(reader, name):
    return len(reader.builder.shape(name)) + 1


def product(reader, node, label, rule):
    """``MatMul`` or ``Mul`` of two computed values: a ``matmul`` (alpha 1, scaled later) or ``mul`` node;
    refused where the ranks would align the batch axis with another axis."""
    ranks = [_rank(reader, name) for name in node.input]
    if len(set(ranks)) != 1:
        raise refuse(label, node.op_type, f"its operands have ranks {ranks}; they must be equal, so that the batch "
                                          "axes line up")
    attrs = {"alpha": 1.0} if rule is ops.matmul.RULE else {}
    reader.builder.add(node.output[0], label, rule.name, list(node.input), attrs)
    if rule is ops.matmul.RULE:
        reader.products[node.output[0]] = 1.0


def matmul(reader, node, label, attrs, rule):
    """``MatMul``: of two computed values a ``matmul`` node, of a value by a constant matrix a linear map."""
    if not any(name in reader.constants for name in node.input):
        return product(reader, node, label, rule)
    onnx_affine.matmul(reader, node, label, attrs, ops.linear.RULE)


def _fold_scale(reader, node):
    """Fold a scalar constant multiplying (or dividing) a ``matmul`` node's output, read by nothing else, into its
    ``alpha``; whether it was."""
    value, const = (node.input[1], node.input[0]) if node.input[0] in reader.constants else node.input
    c = reader.constants.get(const)
    if c is None or c.size != 1 or value not in reader.products or reader.consumers.get(value) != 1 or \
            (node.op_type == "Div" and const != node.input[1]):
        return False
    factor = float(c.reshape(-1)[0])
    alpha = reader.products.pop(value) * (1.0 / factor if node.op_type == "Div" else factor)
    reader.builder.replace_params(value, attrs={"alpha": alpha})
    reader.builder.elide(node.output[0], value)
    reader.products[node.output[0]] = alpha
    return True


def scale(reader, node, label, attrs, rule):
    """``Mul`` of two values (a ``mul`` node), or ``Mul``/``Div`` with a constant: a product's scale where it
    follows a ``matmul`` node, else an affine map."""
    if node.op_type == "Mul" and not any(name in reader.constants for name in node.input):
        return product(reader, node, label, ops.mul.RULE)
    if not _fold_scale(reader, node):
        onnx_affine.affine(reader, node, label, attrs, ops.affine.RULE)


def is_causal_mask(mask, shape):
    """Whether the constant ``mask`` added to values of per-sample ``shape`` is attention's causal mask: over the
    last two axes (square) 0 on and below the diagonal and ``-inf`` above, the same for every other index.

    Examples
    --------
    >>> is_causal_mask(np.triu(np.full((3, 3), -np.inf), 1), (2, 3, 3))
    True
    >>> is_causal_mask(np.zeros((3, 3)), (3, 3))
    False
    """
    mask = np.asarray(mask, dtype=np.float64)
    if len(shape) < 2 or shape[-1] != shape[-2] or mask.ndim < 2 or mask.ndim > len(shape) + 1 or \
            mask.shape[-2:] != tuple(shape[-2:]) or any(n != 1 for n in mask.shape[:-2]):
        return False
    return np.array_equal(mask.reshape(shape[-2:]), np.triu(np.full(shape[-2:], -np.inf), 1))


def add(reader, node, label, attrs, rule):
    """``Add``: attention's causal mask added to scores a Softmax alone reads (the mask is that softmax's), else a
    sum of two values, a bias or an affine map (:func:`.onnx_affine.add`)."""
    a, b = node.input
    value, mask = (b, a) if a in reader.constants else (a, b)
    if value not in reader.constants and mask in reader.constants and \
            is_causal_mask(reader.constants[mask], reader.builder.shape(value)):
        if reader.readers.get(node.output[0]) != ["Softmax"]:
            raise refuse(label, node.op_type, "it adds a causal mask to values not read by a Softmax alone; a mask "
                                              "is supported only right before attention's softmax")
        reader.builder.alias(node.output[0], value)
        reader.causal.add(node.output[0])
        return None
    return onnx_affine.add(ops.affine.RULE)(reader, node, label, attrs, rule)


def softmax(reader, node, label, attrs, rule):
    """An interior ``Softmax`` over one per-sample axis, causal where a causal mask was added to its input."""
    rank = _rank(reader, node.input[0])
    axis = int(attrs.get("axis", 1 if reader.opset < 13 else -1))
    if not -rank <= axis < rank or axis % rank == 0:
        raise refuse(label, node.op_type, f"axis={axis} is the batch axis (or out of range for rank {rank})")
    if reader.opset < 13 and axis % rank != rank - 1:
        raise refuse(label, node.op_type, f"before opset 13 a softmax over axis {axis} of a rank-{rank} value "
                                          "normalises every later axis together; only the last axis is supported")
    causal = node.input[0] in reader.causal
    if causal and axis % rank != rank - 1:
        raise refuse(label, node.op_type, f"axis={axis}: a causal mask is supported on the last axis only")
    reader.builder.add(node.output[0], label, rule.name, [node.input[0]], {"axis": axis % rank - 1, "causal": causal})

