"""The nodes of a feedforward computational graph: their operations, attributes, parameters and shapes.

Every computed node ``v`` has one defining edge
``x_v - sum over parents u of F_(u->v) x_u - b_v`` of the neural sheaf, with
``F`` linear: a dense matrix, a convolution, an average pool, a batch-norm
scale, an identity or a selection (``docs/graph-networks.md``).  Shapes are
per sample, channels first (``(C, L)`` or ``(C, H, W)``, as in PyTorch); a
node's stalk is its value flattened in C order.

Operations (``Node.op``), their parameters and attributes:

==================  ================  ==========================================  =========
op                  params            attrs                                       pattern
==================  ================  ==========================================  =========
``linear``          weight, bias      --                                          --
``conv``            weight, bias      stride, padding, dilation, groups           --
``avgpool``         --                kernel_size, stride, padding,               --
                                      count_include_pad
``adaptive_avgpool``  --              output_size                                 --
``maxpool``         --                kernel_size, stride, padding, dilation      argmax
``batchnorm``       scale, shift      --                                          --
``relu``            --                --                                          mask
``leaky_relu``      --                negative_slope                              mask
``add``             --                --  (two or more parents)                   --
``concat``          --                axis  (two or more parents)                 --
``reshape``         --                shape                                       --
==================  ================  ==========================================  =========

``linear``, ``conv`` and ``batchnorm`` have a bias (a block of ones at the
boundary, as ``1@x`` in the chain): ``batchnorm`` is an eval-mode batch norm
folded into its own per-channel affine node ``scale * x + shift``.
Pattern-dependent nodes are piecewise linear: ``relu``/``leaky_relu`` select
by the mask ``z >= 0`` (active, as in the chain), ``maxpool`` by the argmax of
each window, the first maximum in the window's C order (the lowest flat
input position), which is what PyTorch selects.
"""

import math
import numbers
import re
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ...kernels.windows import output_size, window_indices

#: The input vertex of every graph.
INPUT = "x"
#: Names a node may not take: the input ``x``, the output vertex ``yhat`` and the names whose edge the sheaf
#: makes itself (``e_y`` the output edge, ``e_pin`` the soft pins, ``e_rel`` the reluctance edges).
RESERVED = (INPUT, "yhat", "y", "pin", "rel")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")


@dataclass(frozen=True)
class OpSpec:
    """What an operation takes: parameters, attributes, parents and its pattern kind."""

    params: tuple = ()
    attrs: tuple = ()
    min_inputs: int = 1
    max_inputs: int = 1
    pattern: str = None      # None, "mask" (relu, leaky_relu) or "argmax" (maxpool)
    has_bias: bool = False   # a ones block at the boundary carries its bias

    @property
    def pattern_dependent(self):
        return self.pattern is not None


MANY = 1 << 30
OPS = {
    "linear": OpSpec(params=("weight", "bias"), has_bias=True),
    "conv": OpSpec(params=("weight", "bias"), attrs=("stride", "padding", "dilation", "groups"), has_bias=True),
    "avgpool": OpSpec(attrs=("kernel_size", "stride", "padding", "count_include_pad")),
    "adaptive_avgpool": OpSpec(attrs=("output_size",)),
    "maxpool": OpSpec(attrs=("kernel_size", "stride", "padding", "dilation"), pattern="argmax"),
    "batchnorm": OpSpec(params=("scale", "shift"), has_bias=True),
    "relu": OpSpec(pattern="mask"),
    "leaky_relu": OpSpec(attrs=("negative_slope",), pattern="mask"),
    "add": OpSpec(min_inputs=2, max_inputs=MANY),
    "concat": OpSpec(attrs=("axis",), min_inputs=2, max_inputs=MANY),
    "reshape": OpSpec(attrs=("shape",)),
}


def _read_only(array):
    array = np.array(array, dtype=np.float64, order="C", copy=True)
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class Node:
    """One computed node: its name (a label, e.g. the PyTorch module's qualified name), operation, parents.

    Parameters
    ----------
    name : str
        Unique; letters, digits, ``_`` and ``.``; not ``"x"`` (the input) or ``"yhat"``.
    op : str
        One of :data:`OPS`.
    inputs : sequence of str
        Parent names (``"x"`` is the network input), all defined earlier.
    attrs : dict
        The operation's attributes (tuples of int per spatial axis, ints, floats, bools).
    params : dict
        The operation's arrays (copied to read-only float64).

    Examples
    --------
    >>> import numpy as np
    >>> Node("fc", "linear", ["x"], params={"weight": np.ones((2, 3)), "bias": np.zeros(2)}).inputs
    ('x',)
    """

    name: str
    op: str
    inputs: tuple
    attrs: MappingProxyType = None
    params: MappingProxyType = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name) or self.name in RESERVED:
            raise ValueError(f"node name {self.name!r} is not allowed: use letters, digits, '_' and '.', "
                             f"not {' or '.join(map(repr, RESERVED))}")
        if self.op not in OPS:
            raise ValueError(f"node {self.name!r}: unsupported operation {self.op!r}; supported: {', '.join(OPS)}")
        spec = OPS[self.op]
        inputs = (self.inputs,) if isinstance(self.inputs, str) else tuple(self.inputs)
        if not spec.min_inputs <= len(inputs) <= spec.max_inputs or not all(isinstance(p, str) for p in inputs):
            want = spec.min_inputs if spec.max_inputs == spec.min_inputs else f"at least {spec.min_inputs}"
            raise ValueError(f"node {self.name!r} ({self.op}) takes {want} parent name(s), got {inputs!r}")
        attrs = dict(self.attrs or {})
        params = dict(self.params or {})
        for kind, given, wanted in (("attribute", attrs, spec.attrs), ("parameter", params, spec.params)):
            if set(given) != set(wanted):
                raise ValueError(f"node {self.name!r} ({self.op}) takes the {kind}s {list(wanted)}, got {sorted(given)}")
        for key, value in params.items():
            value = _read_only(value)
            if not np.all(np.isfinite(value)):
                raise ValueError(f"node {self.name!r}: parameter {key!r} holds NaN or Inf")
            params[key] = value
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "attrs", MappingProxyType(attrs))
        object.__setattr__(self, "params", MappingProxyType(params))

    def __reduce__(self):
        # copy, deepcopy and pickle rebuild through the constructor (its mappings are read-only proxies).
        return (Node, (self.name, self.op, self.inputs, dict(self.attrs), dict(self.params)))

    @property
    def spec(self):
        """The :class:`OpSpec` of the node's operation."""
        return OPS[self.op]

    def __repr__(self):
        return f"Node({self.name!r}, {self.op!r}, inputs={list(self.inputs)})"


# --------------------------------------------------------------------- shapes
def _ints(node, key, n_axes, minimum):
    value = node.attrs[key]
    value = (value,) * n_axes if isinstance(value, numbers.Integral) else tuple(value)
    if len(value) != n_axes or not all(isinstance(v, numbers.Integral) and v >= minimum for v in value):
        raise ValueError(f"node {node.name!r} ({node.op}): {key} must be {n_axes} integer(s) >= {minimum}, "
                         f"got {node.attrs[key]!r}")
    return tuple(int(v) for v in value)


def _spatial(node, parent, n_axes):
    if n_axes not in (1, 2) or len(parent) != n_axes + 1:
        raise ValueError(f"node {node.name!r} ({node.op}) takes a (channels, {n_axes} spatial axes) input, "
                         f"got shape {parent}")
    return parent[1:]


def _window_out(node, spatial, kernel, stride, padding, dilation):
    out = tuple(output_size(n, k, s, p, d) for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation))
    if min(out) < 1:
        raise ValueError(f"node {node.name!r} ({node.op}): its window (kernel {kernel}, dilation {dilation}, "
                         f"padding {padding}) does not fit the input of spatial shape {spatial}")
    return out


def _shape_linear(node, parents):
    (parent,) = parents
    W = node.params["weight"]
    if W.ndim != 2 or node.params["bias"].shape != (W.shape[0],):
        raise ValueError(f"node {node.name!r} (linear): weight must be 2-D (out, in) and bias (out,), got "
                         f"{W.shape} and {node.params['bias'].shape}")
    if parent != (W.shape[1],):
        raise ValueError(f"node {node.name!r} (linear) takes a flat input of {W.shape[1]} features, got shape "
                         f"{parent} (flatten first)")
    return (W.shape[0],)


def _shape_conv(node, parents):
    (parent,) = parents
    W = node.params["weight"]
    n_axes = W.ndim - 2
    if n_axes not in (1, 2):
        raise ValueError(f"node {node.name!r} (conv): weight must be 3-D or 4-D, got shape {W.shape}")
    spatial = _spatial(node, parent, n_axes)
    stride = _ints(node, "stride", n_axes, 1)
    padding = _ints(node, "padding", n_axes, 0)
    dilation = _ints(node, "dilation", n_axes, 1)
    groups = node.attrs["groups"]
    if not isinstance(groups, numbers.Integral) or groups < 1 or W.shape[0] % groups:
        raise ValueError(f"node {node.name!r} (conv): groups must be a positive divisor of the "
                         f"{W.shape[0]} output channels, got {groups!r}")
    if parent[0] != W.shape[1] * groups:
        raise ValueError(f"node {node.name!r} (conv) takes {W.shape[1] * groups} input channels, got shape {parent}")
    if node.params["bias"].shape != (W.shape[0],):
        raise ValueError(f"node {node.name!r} (conv): bias must have shape ({W.shape[0]},)")
    return (W.shape[0],) + _window_out(node, spatial, W.shape[2:], stride, padding, dilation)


def _pool_geometry(node, parent):
    kernel = node.attrs["kernel_size"]
    n_axes = len(parent) - 1 if isinstance(kernel, numbers.Integral) else len(tuple(kernel))
    spatial = _spatial(node, parent, n_axes)
    kernel = _ints(node, "kernel_size", n_axes, 1)
    stride = _ints(node, "stride", n_axes, 1)
    padding = _ints(node, "padding", n_axes, 0)
    dilation = _ints(node, "dilation", n_axes, 1) if "dilation" in node.attrs else (1,) * n_axes
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"node {node.name!r} ({node.op}): padding {padding} must be at most half the kernel {kernel}")
    return spatial, kernel, stride, padding, dilation


def _shape_pool(node, parents):
    (parent,) = parents
    if node.op == "avgpool" and not isinstance(node.attrs["count_include_pad"], (bool, np.bool_)):
        raise ValueError(f"node {node.name!r} (avgpool): count_include_pad must be a bool")
    spatial, kernel, stride, padding, dilation = _pool_geometry(node, parents[0])
    out = _window_out(node, spatial, kernel, stride, padding, dilation)
    index, _ = window_indices(spatial, kernel, stride, padding, dilation)
    if np.any(np.all(index < 0, axis=1)):
        raise ValueError(f"node {node.name!r} ({node.op}): a window (kernel {kernel}, dilation {dilation}, padding "
                         f"{padding}) reads only padding on the input of spatial shape {spatial}")
    return (parent[0],) + out


def _shape_adaptive(node, parents):
    (parent,) = parents
    size = node.attrs["output_size"]
    n_axes = len(parent) - 1 if isinstance(size, numbers.Integral) else len(tuple(size))
    _spatial(node, parent, n_axes)
    return (parent[0],) + _ints(node, "output_size", n_axes, 1)


def _shape_batchnorm(node, parents):
    (parent,) = parents
    for key in ("scale", "shift"):
        if node.params[key].shape != (parent[0],):
            raise ValueError(f"node {node.name!r} (batchnorm): {key} must have one entry per channel "
                             f"({parent[0]}), got shape {node.params[key].shape}")
    return parent


def _shape_same(node, parents):
    (parent,) = parents
    if node.op == "leaky_relu":
        slope = node.attrs["negative_slope"]
        if not isinstance(slope, numbers.Real) or not math.isfinite(slope):
            raise ValueError(f"node {node.name!r} (leaky_relu): negative_slope must be a finite number, got {slope!r}")
    return parent


def _shape_add(node, parents):
    if any(p != parents[0] for p in parents):
        raise ValueError(f"node {node.name!r} (add): its parents {list(node.inputs)} have different shapes {parents}")
    return parents[0]


def _shape_concat(node, parents):
    axis = node.attrs["axis"]
    ndim = len(parents[0])
    if not isinstance(axis, numbers.Integral) or not 0 <= axis < ndim:
        raise ValueError(f"node {node.name!r} (concat): axis must be a per-sample axis in 0..{ndim - 1}, got {axis!r}")
    rest = [p[:axis] + p[axis + 1:] for p in parents]
    if any(len(p) != ndim for p in parents) or any(r != rest[0] for r in rest):
        raise ValueError(f"node {node.name!r} (concat): parents {list(node.inputs)} of shapes {parents} differ "
                         f"outside axis {axis}")
    return parents[0][:axis] + (sum(p[axis] for p in parents),) + parents[0][axis + 1:]


def _shape_reshape(node, parents):
    (parent,) = parents
    shape = node.attrs["shape"]
    shape = tuple(shape) if not isinstance(shape, numbers.Integral) else (shape,)
    if not shape or not all(isinstance(n, numbers.Integral) and n >= 1 for n in shape) or \
            math.prod(shape) != math.prod(parent):
        raise ValueError(f"node {node.name!r} (reshape): cannot reshape {parent} to {node.attrs['shape']!r}")
    return tuple(int(n) for n in shape)


_SHAPE_RULES = {"linear": _shape_linear, "conv": _shape_conv, "avgpool": _shape_pool, "maxpool": _shape_pool,
                "adaptive_avgpool": _shape_adaptive, "batchnorm": _shape_batchnorm, "relu": _shape_same,
                "leaky_relu": _shape_same, "add": _shape_add, "concat": _shape_concat, "reshape": _shape_reshape}


def output_shape(node, parent_shapes):
    """Per-sample output shape of ``node`` given its parents' shapes; ValueError naming the node if they do not fit."""
    return _SHAPE_RULES[node.op](node, [tuple(p) for p in parent_shapes])


def window_geometry(node, parent_shape):
    """``(spatial, kernel, stride, padding, dilation)`` of a ``conv``, ``avgpool`` or ``maxpool`` node (tuples)."""
    if node.op == "conv":
        W = node.params["weight"]
        n_axes = W.ndim - 2
        return (tuple(parent_shape[1:]), tuple(W.shape[2:]), _ints(node, "stride", n_axes, 1),
                _ints(node, "padding", n_axes, 0), _ints(node, "dilation", n_axes, 1))
    return _pool_geometry(node, tuple(parent_shape))
