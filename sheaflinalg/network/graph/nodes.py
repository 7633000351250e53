"""The nodes of a feedforward computational graph: name, operation, parents, attributes and parameters.

Every computed node ``v`` has one defining edge
``x_v - f_v(x_parents)`` of the neural sheaf (``docs/graph-networks.md``).
Everything about an operation (what it takes, its shape rule, forward pass,
restriction maps, bounds, velocities, pattern) is owned by its rule in
:mod:`sheaflinalg.network.ops`; a node only checks that it is well formed for
its rule.  Shapes are per sample, channels first (``(C, L)`` or ``(C, H, W)``,
as in PyTorch); a node's stalk is its value flattened in C order.

Operations (``Node.op``), their parameters and attributes:

==================  ================  ==========================================  =========
op                  params            attrs                                       pattern
==================  ================  ==========================================  =========
``linear``          weight, bias      --  (maps the last axis: ``(..., in)``)     --
``conv``            weight, bias      stride, padding, dilation, groups           --
``avgpool``         --                kernel_size, stride, padding,               --
                                      count_include_pad, ceil_mode (optional)
``adaptive_avgpool``  --              output_size                                 --
``maxpool``         --                kernel_size, stride, padding, dilation,     argmax
                                      ceil_mode (optional)
``batchnorm``       scale, shift      --                                          --
``relu``            --                --                                          mask
``leaky_relu``      --                negative_slope                              mask
``add``             --                --  (two or more parents)                   --
``concat``          --                axis  (two or more parents)                 --
``reshape``         --                shape                                       --
``permute``         --                axes                                        --
``mean``            --                axes, keepdim                               --
``pad``             --                pads  (before, after per spatial axis)      --
``slice``           --                axis, start, stop, step                     --
``upsample``        --                scale  (an int per spatial axis), mode      --
                                      (nearest or linear), align_corners
``sum``             --                axes, keepdim                               --
``conv_transpose``  weight, bias      stride, padding, output_padding,            --
                                      dilation, groups
``sigmoid``         --                --                                          tangent
``tanh``            --                --                                          tangent
``gelu``            --                approximate  (``"none"`` or ``"tanh"``)     tangent
``silu``            --                --                                          tangent
``softplus``        --                beta, threshold                             tangent
``elu``             --                alpha                                       tangent
``mish``            --                --                                          tangent
``hardswish``       --                --                                          tangent
``layernorm``       --                n_axes, eps  (trailing axes, no affine)     tangent
``groupnorm``       --                groups, eps  (channel groups, no affine)    tangent
``rmsnorm``         --                n_axes, eps  (trailing axes, no weight)     tangent
``normalize``       --                eps  (L2 over the last axis)                tangent
``affine``          scale, shift      --  (broadcast to the node's shape)         --
``constant``        value             --  (no parents)                            --
``roll``            --                shifts, axes                                --
``clamp``           --                min, max, slope, offset                     piece
``mul``             --                --  (two parents, broadcast)                tangent
``softmax``         --                axis, causal                                tangent
``matmul``          --                alpha  (two parents)                        tangent
==================  ================  ==========================================  =========

A ``tangent`` pattern is the linearisation point of a smooth node (its parents' values side by side):
its sheaf at a state is the node's tangent there (``docs/graph-networks.md``, "Smooth nodes").
"""

import re
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..._common.validation import as_float64_param
from ..ops import RULES, rule_of

#: The input vertex of every graph.
INPUT = "x"
#: Names a node may not take: the input ``x``, the output vertex ``yhat`` and the names whose edge the sheaf
#: makes itself (``e_y`` the output edge, ``e_pin`` the soft pins, ``e_rel`` the reluctance edges).
RESERVED = (INPUT, "yhat", "y", "pin", "rel")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")


#: ``{op name: rule}`` of every operation (:data:`sheaflinalg.network.ops.RULES`).
OPS = RULES


@dataclass(frozen=True, eq=False)
class Node:
    """One computed node: its name (a label, e.g. the PyTorch module's qualified name), operation, parents.

    Parameters
    ----------
    name : str
        Unique; letters, digits, ``_`` and ``.``; not ``"x"`` (the input) or ``"yhat"``.
    op : str
        A registered operation (:data:`OPS`); an unknown one is refused, naming it.
    inputs : sequence of str
        Parent names (``"x"`` is the network input), all defined earlier.
    attrs : dict
        The operation's attributes (tuples of int per spatial axis, ints, floats, bools, strings); an optional
        one it omits takes its default (``OpRule.optional``).
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
        try:
            spec = rule_of(self.op)
        except ValueError as exc:
            raise ValueError(f"node {self.name!r}: {exc}") from None
        inputs = (self.inputs,) if isinstance(self.inputs, str) else tuple(self.inputs)
        if not spec.min_inputs <= len(inputs) <= spec.max_inputs or not all(isinstance(p, str) for p in inputs):
            want = spec.min_inputs if spec.max_inputs == spec.min_inputs else f"at least {spec.min_inputs}"
            raise ValueError(f"node {self.name!r} ({self.op}) takes {want} parent name(s), got {inputs!r}")
        attrs = {**spec.optional, **(self.attrs or {})}          # the optional attributes a node omits
        params = dict(self.params or {})
        for kind, given, wanted in (("attribute", attrs, spec.attrs), ("parameter", params, spec.params)):
            if set(given) != set(wanted):
                raise ValueError(f"node {self.name!r} ({self.op}) takes the {kind}s {list(wanted)}, got {sorted(given)}")
        for key, value in params.items():
            value = as_float64_param(value, f"node {self.name!r}: parameter {key!r}")
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
    def rule(self):
        """The :class:`~sheaflinalg.network.ops.OpRule` of the node's operation (everything about it)."""
        return OPS[self.op]

    def __repr__(self):
        return f"Node({self.name!r}, {self.op!r}, inputs={list(self.inputs)})"


def stated_attrs(node):
    """``node``'s attributes less the optional ones at their defaults (:attr:`OpRule.optional`): what files and
    checkpoints record, so that a node reads the same as before its op gained an attribute.

    Examples
    --------
    >>> pool = Node("p", "maxpool", ["x"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1})
    >>> pool.attrs["ceil_mode"], sorted(stated_attrs(pool))
    (False, ['dilation', 'kernel_size', 'padding', 'stride'])
    """
    optional = node.rule.optional
    return {k: v for k, v in node.attrs.items()
            if k not in optional or type(v) is not type(optional[k]) or v != optional[k]}


def output_shape(node, parent_shapes):
    """Per-sample output shape of ``node`` given its parents' shapes; ValueError naming the node if they do not fit."""
    return node.rule.shape(node, [tuple(p) for p in parent_shapes])


def window_geometry(node, parent_shape):
    """``(spatial, kernel, stride, padding, dilation)`` of a sliding-window node (``conv``, ``avgpool``, ``maxpool``;
    a pool's ends with its ``ceil_mode``): the arguments of :func:`~sheaflinalg.kernels.windows.window_indices`."""
    return node.rule.window(node, tuple(parent_shape))
