"""The subgraphs an ONNX exporter writes for one activation, matched into one node before conversion.

``torch.onnx.export`` writes, at opsets before the activation's own operator:

- GELU as ``0.5 * x * (1 + Erf(x / sqrt 2))`` (Div, Erf, Add, Mul, Mul) before opset 20, its tanh form as
  ``0.5 * x * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))``;
- SiLU as ``x * Sigmoid(x)`` (no operator before Swish, opset 24);
- ``F.normalize(x, dim=-1)`` (Swin V2's cosine attention) as ``x / Expand(Clip(ReduceL2(x), eps), Shape(x))``
  (ONNX's LpNormalization does not clamp the norm);
- Mish as ``x * Tanh(Softplus(x))`` before opset 18, HardSwish as ``x * HardSigmoid(x)`` (alpha 1/6) before
  opset 14, and Softplus with ``beta`` as ``Softplus(beta x) / beta``.

:func:`fuse` replaces each such subgraph by one node of the operator that computes it (Gelu, Swish with
alpha 1, Mish, HardSwish, Softplus with a ``beta`` attribute, LpNormalization with an ``eps`` attribute of
its own), which the converters read
(:mod:`.onnx_activations`).  A product is matched in any order and grouping of its factors.  A pattern
matches only when each of its inner values is read by the pattern alone (its nodes are then dropped) and
every constant is the pattern's up to float32 rounding (files are mostly exported in float32: the file's
sqrt 2 is 1.4142135381698608).  An Erf outside GELU's pattern is refused; another product of two values
is Mul's converter's: a ``mul`` node (:mod:`.onnx_products`).
"""

import math

import numpy as np

from ..errors import UnsupportedModelError
from .builder import refuse
from .onnx_data import tensor_array

#: Relative difference accepted between a pattern's constant and a file's (float32 rounding is 6e-8).
RTOL = 1e-6
#: The constants of GELU's patterns.
SQRT2, TANH_SCALE, CUBIC = math.sqrt(2.0), math.sqrt(2.0 / math.pi), 0.044715


class _Nodes:
    """The file's nodes by the values they compute and its scalar constants, for the matchers."""

    def __init__(self, reader, nodes):
        self.made = {out: node for node in nodes for out in node.output if out}
        self.reader = reader
        self.constants = dict(reader.constants)
        for node in nodes:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.constants[node.output[0]] = tensor_array(reader.onnx, reader.helper, node.attribute[0].t)

    def scalar(self, name):
        """The value of a scalar constant ``name``, or None."""
        value = self.constants.get(name)
        if value is None or np.size(value) != 1 or np.asarray(value).dtype.kind not in "iuf":
            return None
        return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])

    def near(self, value, target):
        return value is not None and abs(value - target) <= RTOL * abs(target)

    def node(self, name, op_type):
        """The node computing ``name`` if it is an ``op_type`` whose value only the pattern reads, else None."""
        node = self.made.get(name)
        if node is None or node.op_type != op_type or not self.inner(name):
            return None
        return node

    def inner(self, name):
        """Whether the value ``name`` may be dropped with a pattern: computed by a default-domain node, read once,
        not the graph's output."""
        node = self.made.get(name)
        return node is not None and node.domain in ("", "ai.onnx") and self.reader.consumers.get(name) == 1 and \
            name != self.reader.output_name

    def between(self, root, x):
        """The nodes computing ``root``'s inputs back to ``x`` and the constants (a matched pattern's inner
        nodes), or None if one of them may not be dropped."""
        inner, todo = [], [name for name in root.input if name != x and name not in self.constants]
        while todo:
            name = todo.pop()
            if not self.inner(name):
                return None
            inner.append(self.made[name])
            todo += [n for n in self.made[name].input if n and n != x and n not in self.constants]
        return inner

    def product(self, name):
        """``(constant, values)``: the product tree computing ``name`` (Muls only it reads) as the product of
        its constant factors and the list of its other factors (``(1.0, [name])`` if it is no product)."""
        node = self.node(name, "Mul")
        if node is None:
            value = self.scalar(name)
            return (1.0, [name]) if value is None else (value, [])
        constant, values = 1.0, []
        for factor in node.input:
            c, v = self.product(factor)
            constant, values = constant * c, values + v
        return constant, values

    def sum_with(self, name, constant):
        """The value added to ``constant`` by the Add computing ``name``, or None."""
        node = self.node(name, "Add")
        if node is None:
            return None
        for a, b in (node.input, node.input[::-1]):
            if self.near(self.scalar(a), constant):
                return b
        return None


def _erf_argument(nodes, name, x):
    """Whether ``name`` is ``x / sqrt 2`` (a Div, or a product by ``1 / sqrt 2``)."""
    div = nodes.node(name, "Div")
    if div is not None:
        return div.input[0] == x and nodes.near(nodes.scalar(div.input[1]), SQRT2)
    constant, values = nodes.product(name)
    return values == [x] and nodes.near(constant, 1.0 / SQRT2)


def _tanh_argument(nodes, name, x):
    """Whether ``name`` is ``sqrt(2 / pi) * (x + 0.044715 x^3)`` (the cube a product of three x or a Pow)."""
    constant, values = nodes.product(name)
    if len(values) != 1 or not nodes.near(constant, TANH_SCALE):
        return False
    add = nodes.node(values[0], "Add")
    if add is None or x not in add.input:
        return False
    constant, values = nodes.product(add.input[1] if add.input[0] == x else add.input[0])
    if len(values) == 1:
        power = nodes.node(values[0], "Pow")
        if power is not None and power.input[0] == x and nodes.scalar(power.input[1]) == 3.0:
            values = [x] * 3
    return values == [x] * 3 and nodes.near(constant, CUBIC)


def _gelu(nodes, constant, values):
    """``("Gelu", x, attrs)`` of ``0.5 * x * (1 + Erf(x / sqrt 2))`` or its tanh form, else None."""
    if len(values) != 2 or not nodes.near(constant, 0.5):
        return None
    for x, other in (values, values[::-1]):
        inner = nodes.sum_with(other, 1.0)
        erf, tanh = nodes.node(inner, "Erf"), nodes.node(inner, "Tanh")
        if erf is not None and _erf_argument(nodes, erf.input[0], x):
            return "Gelu", x, {"approximate": "none"}
        if tanh is not None and _tanh_argument(nodes, tanh.input[0], x):
            return "Gelu", x, {"approximate": "tanh"}
    return None


def _gated(nodes, constant, values):
    """``(op_type, x, attrs)`` of ``x * g(x)``: SiLU (Sigmoid), Mish (Tanh of Softplus), HardSwish
    (HardSigmoid with alpha 1/6, beta 1/2), else None."""
    if len(values) != 2 or constant != 1.0:
        return None
    for x, other in (values, values[::-1]):
        sigmoid, hard, tanh = (nodes.node(other, kind) for kind in ("Sigmoid", "HardSigmoid", "Tanh"))
        if sigmoid is not None and sigmoid.input[0] == x:
            return "Swish", x, {}
        if hard is not None and hard.input[0] == x:
            attrs = {a.name: a.f for a in hard.attribute}
            if nodes.near(attrs.get("alpha", 0.2), 1.0 / 6.0) and attrs.get("beta", 0.5) == 0.5:
                return "HardSwish", x, {}
        softplus = None if tanh is None else nodes.node(tanh.input[0], "Softplus")
        if softplus is not None and softplus.input[0] == x:
            return "Mish", x, {}
    return None


def _softplus(nodes, root):
    """``("Softplus", x, {"beta": beta})`` of ``Softplus(beta x) / beta``, else None."""
    beta = nodes.scalar(root.input[1])
    softplus = nodes.node(root.input[0], "Softplus")
    if softplus is None or beta is None or beta <= 0:
        return None
    constant, values = nodes.product(softplus.input[0])
    return ("Softplus", values[0], {"beta": beta}) if len(values) == 1 and nodes.near(constant, beta) else None


def _norm_axes(nodes, norm):
    """The axes of a ReduceL2 node (attribute, or constant input from opset 18), or None."""
    attrs = {a.name: nodes.reader.onnx.helper.get_attribute_value(a) for a in norm.attribute}
    if len(norm.input) > 1 and norm.input[1] in nodes.constants:
        return [int(a) for a in np.asarray(nodes.constants[norm.input[1]]).reshape(-1)], attrs
    return [int(a) for a in attrs.get("axes", [])], attrs


def _normalize(nodes, root):
    """``("LpNormalization", x, {"axis": -1, "p": 2, "eps": eps})`` of ``x / Expand(Clip(ReduceL2(x), eps),
    Shape(x))`` over the last axis (the Expand optional), else None."""
    x, den = root.input
    expand = nodes.node(den, "Expand")
    shape = expand and nodes.node(expand.input[1], "Shape")
    clip = nodes.node(expand.input[0] if expand else den, "Clip")
    norm = clip and nodes.node(clip.input[0], "ReduceL2")
    if norm is None or norm.input[0] != x or (expand and (shape is None or shape.input[0] != x or shape.attribute)):
        return None
    axes, attrs = _norm_axes(nodes, norm)
    eps = nodes.scalar(clip.input[1]) if len(clip.input) > 1 and clip.input[1] else None
    if axes != [-1] or not attrs.get("keepdims", 1) or eps is None or eps <= 0 or \
            (len(clip.input) > 2 and clip.input[2]):
        return None
    return ("LpNormalization", x, {"axis": -1, "p": 2, "eps": eps})


def _match(nodes, root):
    """``(op_type, x, attrs)`` of the activation computed at ``root``, or None."""
    if root.op_type == "Div":
        return _softplus(nodes, root) or _normalize(nodes, root)
    if root.op_type != "Mul":
        return None
    constant, values = 1.0, []
    for factor in root.input:
        c, v = nodes.product(factor)
        constant, values = constant * c, values + v
    return _gelu(nodes, constant, values) or _gated(nodes, constant, values)


def fuse(reader, nodes):
    """``nodes`` (a file's NodeProtos in order) with every activation pattern replaced by one node of its
    operator, named after the pattern's last node and computing its value; an Erf left outside a GELU
    pattern is refused (UnsupportedModelError naming the file).  The outermost pattern wins: the nodes are matched from the last."""
    nodes = list(nodes)
    done, fused = set(), {}
    graph = _Nodes(reader, nodes)
    for root in reversed(nodes):
        found = None if id(root) in done else _match(graph, root)
        inner = None if found is None else graph.between(root, found[1])
        if inner is not None and not any(id(node) in done for node in inner):
            op_type, x, attrs = found
            fused[id(root)] = reader.onnx.helper.make_node(op_type, [x], [root.output[0]], name=root.name, **attrs)
            done.update(id(node) for node in inner)
    kept = [fused.get(id(node), node) for node in nodes if id(node) not in done]
    for node in kept:
        if node.op_type == "Erf" and node.domain in ("", "ai.onnx"):
            why = "an Erf is supported only inside GELU's pattern 0.5 * x * (1 + Erf(x / sqrt 2))"
            raise UnsupportedModelError(f"{reader.path}: {refuse(node.name or node.output[0], 'Erf', why)}")
    return kept
