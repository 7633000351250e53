"""The ONNX importer's ``Einsum``: a batched product of two values, as the engine's ``matmul`` between permutes.

MaxViT's attention writes ``torch.einsum("B G H I D, B G H J D -> B G H I J", q, k)`` and
``"B G H I J, B G H J D -> B G H I D"``.  An equation of two operands is read as a batched matrix product when
every letter appears once per operand and is one of: a batch letter (in both operands and the output), the one
contracted letter (in both operands, not the output), the one row letter (first operand and output) and the one
column letter (second operand and output).  The operands are permuted to ``(batch..., row, contracted)`` and
``(batch..., contracted, column)``, multiplied, and the product permuted to the output's order: the converters
of ``Transpose`` and ``MatMul`` (:mod:`.onnx_layout`, wherever the samples sit), handed nodes of their own.
Any other equation (a constant operand, an ellipsis, a letter summed out of one operand, a diagonal) is
refused, naming the node.
"""

from types import SimpleNamespace

from .. import ops
from . import onnx_layout
from .builder import Entry, refuse
from .onnx_products import matmul

_TRANSPOSE, _MATMUL = Entry(ops.permute.RULE, onnx_layout.transpose), Entry(ops.matmul.RULE, matmul)


def parse(equation):
    """``(first, second, output)`` letters of a two-operand equation read as a batched matrix product:
    ``(batch, row, contracted, column)`` letter groups, or None where it is not one.

    Examples
    --------
    >>> parse("BGHID,BGHJD->BGHIJ")
    ('BGH', 'I', 'D', 'J')
    >>> parse("ij,jk") is None, parse("ii,ij->ij") is None
    (True, True)
    """
    equation = equation.replace(" ", "")
    if "->" not in equation or "." in equation or equation.count(",") != 1:
        return None
    inputs, out = equation.split("->")
    a, b = inputs.split(",")
    if any(len(set(t)) != len(t) for t in (a, b, out)):
        return None
    batch = "".join(c for c in out if c in a and c in b)
    rows, columns = [c for c in out if c in a and c not in b], [c for c in out if c in b and c not in a]
    contracted = [c for c in a if c in b and c not in out]
    if len(rows) != 1 or len(columns) != 1 or len(contracted) != 1 or \
            set(a) != set(batch + rows[0] + contracted[0]) or set(b) != set(batch + columns[0] + contracted[0]) or \
            set(out) != set(batch + rows[0] + columns[0]):
        return None
    return batch, rows[0], contracted[0], columns[0]


def _step(reader, node, label, entry, inputs, output, **attrs):
    """Convert one node of ``entry``'s op (``inputs`` -> ``output``) standing for a part of ``node``."""
    part = SimpleNamespace(op_type=node.op_type, name=node.name, input=list(inputs), output=[output], attribute=[])
    onnx_layout.convert(reader, part, label, attrs, entry)


def einsum(reader, node, label, attrs, rule):
    """``Einsum`` of two values read as a batched matrix product (see the module), else refused."""
    equation = attrs["equation"].decode() if isinstance(attrs["equation"], bytes) else attrs["equation"]
    letters = parse(equation)
    if letters is None or len(node.input) != 2 or any(name in reader.constants for name in node.input):
        raise refuse(label, node.op_type, f"equation {equation!r}: only a batched matrix product of two values "
                                          "(batch letters, one row, one contracted and one column letter, each "
                                          "once per operand) is supported")
    batch, row, contracted, column = letters
    a, b = equation.replace(" ", "").split("->")[0].split(",")
    out = equation.replace(" ", "").split("->")[1]
    key = node.output[0]
    first, second, product = f"{key}/first", f"{key}/second", f"{key}/product"
    _step(reader, node, label, _TRANSPOSE, [node.input[0]], first, perm=[a.index(c) for c in batch + row + contracted])
    _step(reader, node, label, _TRANSPOSE, [node.input[1]], second,
          perm=[b.index(c) for c in batch + contracted + column])
    _step(reader, node, label, _MATMUL, [first, second], product)
    _step(reader, node, label, _TRANSPOSE, [product], key, perm=[(batch + row + column).index(c) for c in out])
