"""PyTorch models as graph networks, through torch.fx.

The model is traced symbolically (``torch.fx.symbolic_trace``: a
``Sequential`` or any module whose ``forward`` torch.fx can record), every
recorded operation is converted or refused (naming it) before anything runs.
Then a copy of the model in float64 and eval mode runs once on a random input
of two samples: its trace, node by node (every value's shape, which fixes
reshapes and adaptive pools and is compared with the graph's own shape rules;
a node that fails is named with torch's reason), and the model called as a
whole, hooks included.  The parameters are read from that copy after its run
(so a weight a pre-hook computes, as ``weight_norm`` and ``spectral_norm`` do,
is the one the model used), and the graph built is checked against the
trace's values and the model's output (:mod:`.check`).
"""

import copy
import math
import operator

import numpy as np

from ..._common.memory import FLOAT, check_memory
from ..errors import ImportMismatchError, UnsupportedModelError
from ..graph.nodes import INPUT
from ..ops.permute import RULE as PERMUTE
from ..ops.reshape import RULE as RESHAPE
from ..ops.slice import RULE as SLICE
from .builder import GraphBuilder, Inner, check_input_shape, per_sample_shape, refuse
from .check import check_import, random_input
from .torch_affine import is_constant, mark_constant
from .torch_modules import bind
from .torch_table import TorchTable

#: Batch of the shape-propagation pass: a value whose first axis is not this mixes samples.
BATCH = 2


class TraceLimit(UnsupportedModelError):
    """A refusal of what torch.fx's trace does not give as supported operations: a model it cannot trace, a
    layer it keeps whole (a leaf such as ``nn.MultiheadAttention``) or a call it records without entering it
    (a function wrapped by torch.fx, a shape check).  ``Network.from_torch(method="auto")`` then reads the
    model through ``torch.export`` instead."""


_SHAPE_ARITHMETIC = (operator.getitem, operator.mul, operator.floordiv, operator.add, operator.sub, operator.truediv,
                     operator.pow)


def import_torch():
    try:
        import torch
        from torch import nn
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("Network.from_torch needs PyTorch (pip install torch)") from exc
    return torch, nn


class _Walk:
    """The traced model's nodes, their labels and the table that converts them (:mod:`.torch_table`)."""

    def __init__(self, torch, traced):
        self.torch, self.traced = torch, traced
        self.nodes = list(traced.graph.nodes)
        self.order = {node: i for i, node in enumerate(self.nodes)}
        self.shape_valued = set()
        self.aliases = set()        # nodes whose value may share memory with their parent (reshapes, elided)
        self.materialized = set()   # constant values that are nodes of their own (a class token)
        self.table = TorchTable(torch)

    def module(self, node):
        return self.traced.get_submodule(node.target) if node.op == "call_module" else None

    def label(self, node):
        """``(name, op)``: the module's qualified name and class, or the fx node's name and function."""
        if node.op == "call_module":
            return node.target, type(self.module(node)).__name__
        if node.op == "call_method":
            return node.name, f"Tensor.{node.target}"
        return node.name, getattr(node.target, "__name__", str(node.target))

    def final_kind(self, node):
        """``"sigmoid"``, ``"tanh"`` or ``"softmax"`` if ``node`` applies one of them, else None."""
        key = type(self.module(node)) if node.op == "call_module" else node.target
        return self.table.finals.get(key) if node.op in ("call_module", "call_function", "call_method") else None

    def is_shape(self, node):
        """Whether ``node`` computes a size (``x.size(0)``, ``x.shape[1] * 2``), not a tensor."""
        if node.op == "call_method" and node.target == "size":
            return True
        if node.op == "call_function" and node.target is getattr and node.args[1:] == ("shape",):
            return True
        tensors = [a for a in node.all_input_nodes]
        return (node.op == "call_function" and node.target in _SHAPE_ARITHMETIC and bool(tensors)
                and all(a in self.shape_valued for a in tensors))

    def read_as_parameter(self, node):
        """Whether ``node`` reads a parameter or buffer that only functions reading parameters take, as other
        than their input (``F.conv_transpose2d``'s weight)."""
        return node.op == "get_attr" and bool(node.users) and all(
            user.op == "call_function" and user.target in self.table.parameter_readers and user.args[:1] != (node,)
            for user in node.users)
    def is_constant(self, node):
        """Whether ``node``'s value is not computed from the input: a parameter or buffer read in ``forward``, or
        a computation on such values and sizes only."""
        if node.op == "get_attr":
            return True
        inputs = node.all_input_nodes
        return (node.op in ("call_function", "call_method") and any(is_constant(a) for a in inputs)
                and all(is_constant(a) or a in self.shape_valued for a in inputs))

    def in_place(self, node):
        module = self.module(node)
        if module is not None:
            return bool(getattr(module, "inplace", False))
        name = getattr(node.target, "__name__", node.target)
        return bool(node.kwargs.get("inplace")) or (isinstance(name, str) and name.endswith("_")
                                                     and not name.startswith("_"))

    def check_parents(self, step, name, op):
        """Every value a step reads is a tensor computed from the input (not a constant or a size)."""
        for value in step.reads():
            if not hasattr(value, "op") or value in self.shape_valued or (is_constant(value)
                                                                           and value not in self.materialized):
                refusal = refuse(name, op, f"it combines the network's values with the constant {value!r}; only "
                                           "tensors computed from the input are supported")
                # a layer on a constant tensor (Swin V2's position-bias MLP on its table): torch.fx does not
                # compute it, torch.export folds it into a constant
                raise TraceLimit(refusal.args[0]) if hasattr(value, "op") and value not in self.shape_valued \
                    else refusal

    def check_in_place(self, node, name, op):
        """An in-place operation may not overwrite a tensor (or what it views) that another node reads later."""
        value = node.args[0] if node.args else None
        while hasattr(value, "users"):
            later = [u for u in value.users if u is not node and self.order[u] > self.order[node]]
            if later:
                raise refuse(name, op, f"it modifies its input {value.name!r} in place, which {later[0].name!r} "
                                       "reads afterwards; use the out-of-place form (inplace=False)")
            value = value.args[0] if value in self.aliases else None


def _entry(walk, node):
    """The table's entry of a function or tensor method call, or None."""
    if node.op not in ("call_method", "call_function"):
        return None
    table = walk.table
    if node.op == "call_method":
        return table.methods.get(node.target)
    return table.functions.get(node.target) or table.named.get(
        f"{getattr(node.target, '__module__', '')}.{getattr(node.target, '__name__', '')}")


def _converter(walk, node, name, op):
    """``convert(node) -> Step`` of the fx ``node`` from the table's entry, or None if it has none."""
    table = walk.table
    if node.op == "call_module":
        if len(node.args) != 1 or node.kwargs:
            raise TraceLimit(refuse(name, op, "a module must be called on one tensor, given positionally (other "
                                              "arguments, such as ConvTranspose's output_size, are not supported: "
                                              "set the layer's output_padding)").args[0])
        module = walk.module(node)
        # a subclass of a supported layer (torch.nn.utils.parametrize's ParametrizedLinear, ...) is read as that
        # layer: its weight is what the layer computes with, and the check refuses a forward of its own
        entry = next((table.modules[cls] for cls in type(module).__mro__ if cls in table.modules), None)
        return entry and (lambda node: entry.convert(entry.rule, walk.torch, module, name, op, node.args[0]))
    if node.op in ("call_method", "call_function"):
        entry = _entry(walk, node)
        return entry and (lambda node: entry.convert(entry.rule, node, name, op))
    raise refuse(name, node.op, "reading a parameter or buffer directly in forward is not supported; "
                               "use a module (nn.Linear, nn.Conv2d, ...)")


def _steps(walk, final):
    """``[(fx node, name, op, Step)]`` of every computing node, or the refusal of the first unsupported one."""
    steps = []
    for node in walk.nodes:
        if node.op in ("placeholder", "output") or node is final:
            continue
        if walk.is_shape(node):
            walk.shape_valued.add(node)
            continue
        if walk.read_as_parameter(node):     # read by the converter of the function that takes it
            continue
        name, op = walk.label(node)
        constant = walk.is_constant(node)
        if constant:
            mark_constant(node)
            if node.op == "get_attr" or getattr(_entry(walk, node), "rule", None) is None or \
                    _entry(walk, node).rule.max_inputs:
                continue        # read by the steps that combine it with values (a node only if it has no parents)
        convert = _converter(walk, node, name, op)
        if convert is None and walk.final_kind(node):
            raise refuse(name, op, f"{walk.final_kind(node)} is supported only as the output activation (the "
                                   "model's last operation)")
        if convert is None:
            raise TraceLimit(refuse(name, op, "this operation has no sparse restriction map; supported: "
                                              f"{walk.table.supported()}").args[0])
        if walk.in_place(node):
            walk.check_in_place(node, name, op)
        try:
            step = convert(node)
        except (IndexError, KeyError) as exc:      # arguments by keyword where the input is expected first
            raise refuse(name, op, f"its arguments {node.args} {node.kwargs} are not understood ({exc})") from None
        if constant:
            walk.materialized.add(node)
        walk.check_parents(step, name, op)
        if step.rule in (None, RESHAPE, PERMUTE, SLICE):     # views of their parent
            walk.aliases.add(node)
        steps.append((node, name, op, step))
    return steps


def _output(walk):
    """``(final activation node or None, output activation, the fx node computing z_out)``."""
    (result,) = [node for node in walk.nodes if node.op == "output"][0].args
    if not hasattr(result, "op"):
        raise UnsupportedModelError(f"the model returns {type(result).__name__}; expected one tensor (several "
                                    "outputs are not supported)")
    kind = walk.final_kind(result)
    if kind is None:
        return None, "identity", result
    name, op = walk.label(result)
    if kind == "softmax":
        dim = walk.module(result).dim if result.op == "call_module" else \
            bind(lambda input, dim=None, *a, **k: None, result)["dim"]
        if dim not in (-1, 1):
            raise ValueError(f"Softmax must act on the feature dimension (dim=-1 or 1), got dim={dim}")
    return result, kind, result.args[0]


def _input_shape(walk, input_shape):
    placeholders = [node for node in walk.nodes if node.op == "placeholder"]
    if len(placeholders) != 1:
        raise UnsupportedModelError(f"the model takes {len(placeholders)} inputs "
                                    f"({', '.join(p.name for p in placeholders)}); exactly one is supported")
    (x,) = placeholders
    if input_shape is not None:
        return x, check_input_shape(input_shape)
    first = min(x.users, key=walk.order.get, default=None)
    module = walk.module(first) if first is not None else None
    if isinstance(module, walk.torch.nn.Linear):
        return x, (int(module.in_features),)
    first_name = walk.label(first) if first is not None else ("nothing", "")
    raise ValueError(f"input_shape is required: the model's first layer {first_name[0]!r} ({first_name[1]}) is not "
                     "Linear; pass the per-sample input shape without the batch axis, e.g. input_shape=(1, 40) or "
                     "(3, 32, 32)")


def float64_copies(torch, *modules):
    """Deep copies of the modules (the model and its trace, sharing their layers) on the CPU, in float64 and eval
    mode.

    A tensor attribute computed from parameters is not a leaf and cannot be deep-copied (old-style
    ``weight_norm`` keeps ``weight = g * v / ||v||``): it is copied detached, and the model's own pre-hook
    recomputes it when the copy runs.
    """
    memo = {id(value): value.detach().clone() for layer in modules[0].modules() for value in vars(layer).values()
            if isinstance(value, torch.Tensor) and not value.is_leaf}
    try:
        copies = copy.deepcopy(modules, memo)
    except Exception as exc:     # a layer holding something that cannot be copied (a lock, a file, ...)
        raise UnsupportedModelError(f"the model cannot be copied to run it once in float64 ({type(exc).__name__}: "
                                    f"{exc})") from None
    return tuple(m.to(device="cpu", dtype=torch.float64).eval() for m in copies)


def _run_trace(torch, walk, traced, X):
    """``{fx node name: its value}`` of the trace on ``X``; ValueError naming the node that fails and why."""
    from torch.fx import Interpreter

    values = {}

    class Recorder(Interpreter):
        def run_node(self, node):
            try:
                result = super().run_node(node)
            except Exception as exc:     # torch's own message says what does not fit
                name, op = walk.label(node)
                raise ValueError(f"the model does not run on inputs of shape (n, *{X.shape[1:]}) (input_shape="
                                 f"{X.shape[1:]}): node {name!r} ({op}) fails: {type(exc).__name__}: {exc}") from None
            # a copy: a later in-place operation must not change the value recorded here
            values[node.name] = result.detach().clone() if isinstance(result, torch.Tensor) else result
            return result

    recorder = Recorder(traced)
    recorder.extra_traceback = False
    recorder.run(torch.from_numpy(X))
    return values


def _run(torch, walk, module, input_shape):
    """Run the model once on the check's random input, in float64 on a copy: ``(X, {fx node name: value of the
    trace}, the model's own output, the trace's copy)``.  The trace gives every value's shape and the values
    compared node by node; the model called as a whole (hooks included) gives the output it is checked against;
    the copy, after its run, holds the parameters the model used (those a pre-hook sets included)."""
    n_values = BATCH * math.prod(input_shape) * 4 + sum(p.numel() for p in module.parameters())
    check_memory(FLOAT * n_values, f"the shape pass on inputs of shape {input_shape}", "check input_shape")
    module64, traced64 = float64_copies(torch, module, walk.traced)
    X = random_input(BATCH, input_shape)
    with torch.no_grad():
        values = _run_trace(torch, walk, traced64, X)
        try:
            output = module64(torch.from_numpy(X))
        except Exception as exc:     # a hook or the model's own forward, outside its trace
            raise ImportMismatchError(f"the PyTorch model called as a whole fails where its trace runs: "
                                      f"{type(exc).__name__}: {exc}") from None
    if not isinstance(output, torch.Tensor):
        raise ImportMismatchError(f"the PyTorch model called as a whole returns {type(output).__name__}, where its "
                                  "trace returns one tensor (a forward hook on the model?)")
    return X, values, output.numpy(), traced64


def _trace(torch, nn, module):
    if not isinstance(module, nn.Module):
        raise TypeError(f"expected a torch.nn.Module (nn.Sequential or a module torch.fx can trace), "
                        f"got {type(module).__name__}")
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as exc:     # TraceError and the errors of control flow on traced values
        raise TraceLimit(f"torch.fx cannot trace {type(module).__name__} (data-dependent control flow or an "
                         f"operation it cannot record): {type(exc).__name__}: {exc}") from None


def _attrs(step, node, shape):
    """A step's attributes, those that depend on shapes resolved (``shape(fx node)``: torch's per-sample shape)."""
    return {**step.attrs, **(step.resolve(node, shape) if step.resolve else {})}


def emit(builder, node, name, op, step, shape, value):
    """Add the nodes of a converted ``step`` computing the value ``node`` (its inner nodes first, then its own
    and its affine part) to ``builder``; a refusal where the graph's shape is not the framework's.

    ``shape(node)`` is the per-sample shape the framework computed, ``value(node)`` a constant's float64
    array.  Shared by the torch.fx and the torch.export importers.
    """
    for key, suffix, inner in step.inner:
        builder.add(key, f"{name}.{suffix}", inner.rule.name, inner.parents, _attrs(inner, node, shape), inner.params)
    attrs = _attrs(step, node, shape)
    params = {**step.params, **(step.constants(node, shape, value) if step.constants else {})}
    after = step.then(node, shape) if step.then else None
    key = Inner(f"{node.name}.{step.rule.name}") if after else node
    builder.add(key, name, step.rule.name, step.parents, attrs, params)
    if after:
        builder.add(node, f"{name}.affine", after[0].name, [key], {}, after[1])
    if builder.shape(node) != shape(node):
        raise refuse(name, op, f"its per-sample shape is {builder.shape(node)} by the graph's rules but "
                               f"{shape(node)} in torch")


def graph_from_torch(module, input_shape=None):
    """The :class:`~sheaflinalg.network.graph.Graph` of a PyTorch model (see ``Network.from_torch``)."""
    torch, nn = import_torch()
    walk = _Walk(torch, _trace(torch, nn, module))
    _steps(walk, _output(walk)[0])           # every refusal before anything runs
    input_shape = _input_shape(walk, input_shape)[1]
    X, values, model_output, traced64 = _run(torch, walk, module, input_shape)
    # the parameters are read from the copy that ran: those a pre-hook computes (weight_norm, spectral_norm)
    # are the ones the model used
    walk = _Walk(torch, traced64)
    final, output, result = _output(walk)
    steps = _steps(walk, final)
    x = _input_shape(walk, input_shape)[0]

    def shape(node):
        name, op = walk.label(node)
        if not isinstance(values.get(node.name), torch.Tensor):
            raise refuse(name, op, "its result is not a single tensor")
        return per_sample_shape(name, op, values[node.name].shape, BATCH)

    def value(key):
        return values[key.name].numpy() if hasattr(key, "op") else np.asarray(key, dtype=np.float64)

    builder = GraphBuilder(input_shape, x)
    read = {parent for _, _, _, step in steps for parent in step.parents}
    for node, name, op, step in steps:
        if step.rule is not None and not step.parents and node not in read:
            continue        # a constant only arithmetic reads (x + pos.expand(1, -1, -1)): no node
        if step.rule is None:
            if isinstance(values.get(node.name), torch.Tensor) and shape(node) != builder.shape(step.parents[0]):
                raise refuse(name, op, f"it changes the shape {builder.shape(step.parents[0])} to {shape(node)}; "
                                       "only a value of the same shape is an identity")
            builder.elide(node, step.parents[0])
            continue
        emit(builder, node, name, op, step, shape, value)
    if output == "softmax" and len(shape(result)) != 1:
        raise UnsupportedModelError(f"the softmax output acts on values of shape {shape(result)}; flatten first")
    graph = builder.graph(result, output)
    reference = {name: values[key.name].numpy() for name, key in builder.sources.items()
                 if name != INPUT and isinstance(values.get(key.name), torch.Tensor)}
    check_import(graph, X, reference, model_output, "the PyTorch model",
                 "a forward hook, a value modified in place through an alias, which torch.fx does not record, or "
                 "another computation outside the trace; remove it or write it with supported layers")
    return graph
