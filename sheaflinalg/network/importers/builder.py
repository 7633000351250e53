"""A graph being imported: nodes in order, the importer's names of elided values, refusals naming the node.

The PyTorch and ONNX importers both walk a model's own graph in topological
order and give each of its values a key (a torch.fx node, an ONNX tensor
name).  Every value becomes a :class:`~sheaflinalg.network.graph.Node`, or is
elided (Identity, Dropout in eval mode, a reshape that keeps the shape) and
then stands for its parent.
"""

import math
import numbers
import re
from typing import NamedTuple

import numpy as np

from ..errors import UnsupportedModelError
from ..graph import Graph, Node
from ..graph.nodes import INPUT, RESERVED, output_shape
from ..ops.concat import RULE as CONCAT
from ..ops.reshape import RULE as RESHAPE

_NOT_NAME = re.compile(r"[^A-Za-z0-9_.]")


class Entry(NamedTuple):
    """One framework name of an importer's table: ``rule``, the op it becomes (an
    :class:`~sheaflinalg.network.ops.OpRule`, or None for a value elided into its parent or a constant), and
    ``convert``, the converter handed that rule (each importer says its signature).

    Examples
    --------
    >>> from sheaflinalg.network import ops
    >>> Entry(ops.relu.RULE, None).rule.name
    'relu'
    """

    rule: object
    convert: object


class Inner(NamedTuple):
    """The key of a value an importer makes between two of the model's (a normalisation before its affine
    part, attention's scores before its output): ``name`` is no name of the model's, so the check has no
    reference value for it."""

    name: str


def or_list(names):
    """``names`` as a list in words: ``"a, b or c"``.

    Examples
    --------
    >>> or_list(["Sigmoid", "Tanh", "Softmax"]), or_list(["Relu"])
    ('Sigmoid, Tanh or Softmax', 'Relu')
    """
    names = list(names)
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def refuse(name, op, why):
    """The one refusal of an importer: ``UnsupportedModelError`` naming the node and its operation."""
    return UnsupportedModelError(f"node {name!r} ({op}) is not supported: {why}")


def fold_batchnorm(name, op, gamma, beta, mean, var, eps):
    """``(scale, shift)`` of an eval-mode batch norm: ``scale = gamma / sqrt(var + eps)``, ``shift = beta - mean
    * scale`` (float64); refusal if ``var + eps`` is not positive.

    Examples
    --------
    >>> fold_batchnorm("bn", "BatchNorm1d", np.ones(1), np.zeros(1), np.ones(1), np.full(1, 3.0), 1.0)
    (array([0.5]), array([-0.5]))
    """
    denominator = np.asarray(var, dtype=np.float64) + float(eps)
    if not np.all(denominator > 0):
        raise refuse(name, op, f"running_var + eps must be positive, got {denominator.min()!r}")
    scale = np.asarray(gamma, dtype=np.float64) / np.sqrt(denominator)
    return scale, np.asarray(beta, dtype=np.float64) - np.asarray(mean, dtype=np.float64) * scale


def check_input_shape(input_shape):
    """``input_shape`` as a tuple of positive ints (per sample, no batch axis), or ValueError."""
    shape = (input_shape,) if isinstance(input_shape, numbers.Integral) else input_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if not shape or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1 for n in shape):
        raise ValueError(f"input_shape must be a tuple of positive ints, the per-sample shape without the batch "
                         f"axis (e.g. (1, 40) or (3, 32, 32)), got {input_shape!r}")
    return tuple(int(n) for n in shape)


def _node_name(label, taken):
    name = _NOT_NAME.sub("_", str(label)).lstrip(".") or "node"
    if name in RESERVED:
        name += "_"
    base, k = name, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


class GraphBuilder:
    """Nodes in topological order, keyed by the importer's own names for its values.

    Examples
    --------
    >>> import numpy as np
    >>> b = GraphBuilder((3,))
    >>> b.add("fc", "fc", "linear", ["x"], params={"weight": np.ones((2, 3)), "bias": np.zeros(2)})
    >>> b.elide("drop", "fc")
    >>> b.add("act", "act", "relu", ["drop"])
    >>> b.shape("act"), [n.inputs for n in b.graph("act").nodes]
    ((2,), [('x',), ('fc',)])
    """

    def __init__(self, input_shape, input_key="x"):
        self.input_shape = check_input_shape(input_shape)
        self.nodes = []
        self._names = {input_key: INPUT}
        self._shapes = {INPUT: self.input_shape}
        #: ``{graph name: the importer's key of the node's final value}`` (elided values and a MatMul's bias
        #: added afterwards move it): where the model's own value of the node is read for the check.
        self.sources = {}

    def name(self, key):
        """The graph name standing for the importer's value ``key``."""
        return self._names[key]

    def has(self, key):
        """Whether ``key`` is a value of the graph being built (computed from the input, or the input)."""
        return key in self._names

    def shape(self, key):
        """Per-sample shape of the value ``key``."""
        return self._shapes[self._names[key]]

    def elide(self, key, parent):
        """``key`` is its parent's value (Identity, Dropout in eval mode, a reshape keeping the shape)."""
        self._names[key] = self._names[parent]
        self.sources[self._names[key]] = key

    def alias(self, key, parent):
        """``key`` is read as its parent's node but is not its value, so the import is not checked against it
        (attention's scores with the causal mask added: the softmax reading them applies the mask)."""
        self._names[key] = self._names[parent]

    def add(self, key, label, op, parents, attrs=None, params=None):
        """Append a node called after ``label`` computing ``key`` from the values ``parents``."""
        unknown = [p for p in parents if p not in self._names]
        if unknown:
            raise ValueError(f"it reads {unknown[0]!r}, which is not computed from the network's input")
        inputs = [self._names[p] for p in parents]
        if (op == RESHAPE.name and tuple(attrs["shape"]) == self._shapes[inputs[0]]) or (op == CONCAT.name
                                                                                          and len(inputs) == 1):
            self.elide(key, parents[0])       # a reshape to the same shape, a concatenation of one value
            return
        node = Node(_node_name(label, self._shapes), op, inputs, attrs, params)
        self._shapes[node.name] = output_shape(node, [self._shapes[p] for p in inputs])
        self.nodes.append(node)
        self._names[key] = node.name
        self.sources[node.name] = key

    def replace_params(self, key, params=None, attrs=None):
        """Give the node computing ``key`` new parameters or attributes (a bias added after a matrix product, the
        scale of a product of two values)."""
        i = next(i for i, node in enumerate(self.nodes) if node.name == self._names[key])
        node = self.nodes[i]
        self.nodes[i] = Node(node.name, node.op, node.inputs, {**node.attrs, **(attrs or {})},
                             {**node.params, **(params or {})})

    def users(self, key):
        """Names of the nodes reading the value ``key``."""
        return [node.name for node in self.nodes if self._names[key] in node.inputs]

    def graph(self, output_key, output="identity"):
        """The :class:`Graph` computing ``output_key`` (nodes it does not read are dropped)."""
        if output_key not in self._names:
            raise UnsupportedModelError(f"the model's output {str(output_key)!r} is not computed from its input (a "
                                        "constant, or a size): it computes no network")
        last = self._names[output_key]
        if last == INPUT:
            raise UnsupportedModelError("the model returns its input unchanged: it computes nothing")
        needed, order = {last}, []
        for node in reversed(self.nodes[:[n.name for n in self.nodes].index(last) + 1]):
            if node.name in needed:
                needed.update(node.inputs)
                order.append(node)
        return Graph(self.input_shape, order[::-1], output)


def per_sample_shape(name, op, shape, batch):
    """A value's shape without its batch axis; refuses an operation that mixes the samples of a batch."""
    shape = tuple(int(n) for n in shape)
    if not shape or shape[0] != batch:
        raise refuse(name, op, f"it mixes the samples of a batch (a batch of {batch} gives shape {shape}); every "
                               "operation must act on each sample separately")
    if len(shape) == 1:
        raise refuse(name, op, "its value has no per-sample axis (one number per batch entry)")
    if math.prod(shape) == 0:
        raise refuse(name, op, f"its value is empty (shape {shape})")
    return shape[1:]


def per_sample(name, op, value, ndim):
    """A constant operand as an array broadcasting against per-sample values of ``ndim`` axes: a number as
    ``(1,)``, a leading batch axis of length 1 (or of equal rows) dropped; refusal if it varies over the batch.

    Examples
    --------
    >>> per_sample("s", "Mul", np.ones((1, 3, 4)), 2).shape, per_sample("s", "Mul", 2.0, 2)
    ((3, 4), array([2.]))
    """
    value = np.asarray(value, dtype=np.float64)
    if value.ndim == 0:
        return value.reshape(1)
    if value.ndim <= ndim:
        return value
    if value.ndim > ndim + 1 or (value.shape[0] != 1 and np.ptp(value, axis=0).max(initial=0.0) != 0.0):
        raise refuse(name, op, f"its constant of shape {value.shape} does not broadcast over the batch of values "
                               f"with {ndim} per-sample axes the same way for every sample")
    return value[0]


def affine_params(name, op, kind, constant, constant_first, alpha=1.0):
    """``{scale, shift}`` of ``x + a c``, ``x - a c``, ``c + a x``, ``c - a x``, ``x * c``, ``c * x`` or ``x / c``
    (``kind``: ``"add"``, ``"sub"``, ``"mul"``, ``"div"``; ``a`` is ``alpha``) for the per-sample constant ``c``.

    Examples
    --------
    >>> affine_params("s", "Sub", "sub", np.array([2.0]), True)
    {'scale': array([-1.]), 'shift': array([2.])}
    """
    one, zero = np.ones(1), np.zeros(1)
    if kind == "mul":
        return {"scale": constant, "shift": zero}
    if kind == "div":
        if constant_first or not np.all(constant != 0):
            raise refuse(name, op, "only the division of a value by a constant without zeros is an affine map")
        return {"scale": 1.0 / constant, "shift": zero}
    sign = -1.0 if kind == "sub" else 1.0
    if constant_first:
        return {"scale": sign * alpha * one, "shift": constant}
    return {"scale": one, "shift": sign * alpha * constant}
