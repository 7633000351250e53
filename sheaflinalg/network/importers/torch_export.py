"""PyTorch models as graph networks, through ``torch.export`` (ATen graphs).

For models torch.fx cannot trace (Hugging Face's GPT-2, torchvision's vision transformers): a copy of the
model in float64 and eval mode is exported on the check's random input of :data:`~.torch_fx.BATCH`
samples (``torch.export.export``), decomposed to core ATen (``run_decompositions``, keeping whole the ops
in :data:`~.aten_table.KEPT`: linear maps, attention, the smooth activations, upsampling), and run once
node by node.  A value that does not depend on the input (a parameter, a causal mask, a position
embedding) is a constant, read off that run; every ATen call on values computed from the input is
converted through :mod:`.aten_table` into the ops the torch.fx importer writes (their converters shared),
with the batch wherever the program keeps it (:mod:`.batch_layout`), or refused naming the node and its
ATen op: data-dependent control flow (torch.export fails), random ops, a mutated buffer, a value mixing
the samples of the batch.  The graph built is checked against the run's values and the model's own
output (:mod:`.check`).
"""

import logging
import math
import operator

from ..._common.memory import FLOAT, check_memory
from ..errors import ImportMismatchError, UnsupportedModelError
from .batch_layout import STANDARD, from_flat
from .batch_layout import axis as layout_axis
from .batch_layout import constant_sample
from .aten_table import ATEN, FINALS, KEPT, supported
from .builder import GraphBuilder, check_input_shape, refuse
from .check import check_import, random_input
from .torch_affine import mark_constant
from .torch_fx import BATCH, TraceLimit, emit, float64_copies, graph_from_torch, import_torch

LOG = logging.getLogger(__name__)
#: The importers ``Network.from_torch`` chooses between.
METHODS = ("auto", "fx", "export")


def op_name(node):
    """The ATen op of an exported node, as ``aten.add.Tensor``."""
    return str(node.target)


def label(node):
    """A node's name in the graph: the qualified name of the layer (a module without children) that computes
    it, else the exported node's own name."""
    stack = node.meta.get("nn_module_stack") or {}
    path, kind = list(stack.values())[-1] if stack else ("", "")
    return path if path and _is_leaf(kind) else node.name


def _is_leaf(kind):
    """Whether the module class ``kind`` (a qualified name or class) holds no layers of its own (Linear, Conv2d,
    ...): a container's operations are named after themselves."""
    name = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
    return name.startswith("torch.nn.modules.") and not name.endswith(("Sequential", "ModuleList", "ModuleDict",
                                                                      "MultiheadAttention"))


class Program:
    """An exported program run once: ``values`` of its nodes, which depend on the input (``dependent``) and
    where their samples sit (``layouts``).  Converters read constants (:meth:`value`), per-sample shapes
    (:meth:`shape`) and axes (:meth:`axis`) through it."""

    def __init__(self, torch, ep, X):
        self.torch, self.ep, self.X = torch, ep, X
        self.nodes = list(ep.graph_module.graph.nodes)
        self.values = _run(torch, ep, self.nodes, X)
        self.dependent, self.layouts = set(), {}
        self.builder = None

    def is_value(self, arg):
        """Whether an argument is computed from the input."""
        return hasattr(arg, "op") and arg in self.dependent

    def tensor(self, node):
        """The torch value of ``node`` (the first of a tuple: a normalisation's output, not its statistics)."""
        value = self.values[node]
        return value[0] if isinstance(value, (tuple, list)) else value

    def value(self, arg):
        """A constant argument as a float64 array (a number, a parameter, a value computed from them)."""
        import numpy as np

        if not hasattr(arg, "op"):
            return np.asarray(arg, dtype=np.float64)
        return self.tensor(arg).detach().to(dtype=self.torch.float64).numpy().copy()

    def aten_shape(self, node):
        return tuple(int(n) for n in self.tensor(node).shape)

    def layout(self, node):
        return self.layouts[node]

    def shape(self, node):
        """The per-sample shape of a value computed from the input."""
        return self.layout(node).per_sample(self.aten_shape(node))

    def axis(self, node, d, name, op):
        """The per-sample axis of the value's ATen dim ``d`` (refusing the dim holding the samples)."""
        return layout_axis(self.layout(node), name, op, d, len(self.aten_shape(node)))

    def sample(self, name, op, constant, like, shape=None):
        """A constant broadcast against the value ``like`` (to ``shape``, by default its shape) and laid out as
        it, as one sample's array."""
        shape = self.aten_shape(like) if shape is None else shape
        return constant_sample(name, op, self.value(constant), shape, self.layout(like), BATCH)

    def standard(self, node, name, op):
        """Refuse a value whose samples are not along its first dim alone (channels, windows read from it)."""
        if self.layout(node) != STANDARD:
            raise refuse(name, op, f"its input holds the samples of the batch in dim {self.layout(node).dim} (of "
                                   f"shape {self.aten_shape(node)}); this operation is read only on values with "
                                   "the batch first")

    def reshaped(self, node, parent, name, op):
        """Set the layout of ``node``, a view of ``parent`` (same entries in the same order)."""
        A, K = self.layout(parent).flat(self.aten_shape(parent))
        layout = from_flat(self.aten_shape(node), A, K, BATCH)
        if layout is None:
            raise refuse(name, op, f"it reshapes {self.aten_shape(parent)} to {self.aten_shape(node)}, which mixes "
                                   "the samples of the batch")
        self.layouts[node] = layout


def _run(torch, ep, nodes, X):
    """``{node: value}`` of the exported program on ``X`` (parameters, buffers and constants from the program)."""
    from torch.fx import Interpreter

    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            args.append(torch.from_numpy(X))
        elif spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            source = ep.state_dict if spec.target in ep.state_dict else ep.constants
            args.append(source[spec.target].detach())
        else:
            raise UnsupportedModelError(f"the exported model takes a {spec.kind.name} input ({spec.arg}); only "
                                        "tensors are supported")
    values = {}

    class Recorder(Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            values[node] = result
            return result
    with torch.no_grad():
        Recorder(ep.graph_module).run(*args)
    return values


def _export(torch, module64, X):
    """The model's exported program, decomposed to core ATen but for the ops kept whole."""
    name = type(module64).__name__
    try:
        ep = torch.export.export(module64, (torch.from_numpy(X),))
    except Exception as exc:     # data-dependent control flow, an operation torch cannot trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UnsupportedModelError(f"torch.export cannot export {name} (data-dependent control flow or an "
                                    f"operation it cannot trace): {type(exc).__name__}: {first}") from None
    table = torch.export.default_decompositions()
    for packet in KEPT:
        for overload in getattr(torch.ops.aten, packet).overloads():
            table.pop(getattr(getattr(torch.ops.aten, packet), overload), None)
    ep = ep.run_decompositions(table)
    _check_signature(ep)
    return ep


def _check_signature(ep):
    """One tensor in, one tensor out, nothing mutated."""
    inputs = [s for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    if len(inputs) != 1:
        raise UnsupportedModelError(f"the model takes {len(inputs)} inputs; exactly one tensor is supported")
    for spec in ep.graph_signature.output_specs:
        if spec.kind.name != "USER_OUTPUT":
            raise UnsupportedModelError(f"the model's forward mutates {spec.target or spec.arg} in place "
                                        f"({spec.kind.name}: a buffer updated at every call, such as a batch norm's "
                                        "statistics in training mode); only a function of its input is supported")
    outputs = [s for s in ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"]
    if len(outputs) != 1:
        raise UnsupportedModelError(f"the model returns {len(outputs)} values; expected one tensor")


def _skipped(node):
    """Nodes that compute nothing the network needs: assertions, dead values."""
    return node.op == "call_function" and (getattr(node.target, "__name__", "").startswith(("_assert", "sym_"))
                                           or not node.users)


def _check_random(torch, node):
    """Refuse a random op (its draw differs at every call), but attention, whose converter refuses dropout."""
    random = isinstance(node.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in node.target.tags
    if random and getattr(node.target, "__name__", "").split(".")[0] not in ATEN:
        raise refuse(label(node), op_name(node), "it is random; only a deterministic function of the input is "
                                                 "supported")


def _default_layout(program, node):
    """A value keeps the layout of its first parent computed from the input where its rank and the extent of the
    dim holding the samples stay (elementwise operations, products on the last axes)."""
    parent = next(a for a in node.all_input_nodes if program.is_value(a))
    layout, shape = program.layout(parent), program.aten_shape(node)
    if len(shape) == len(program.aten_shape(parent)) and shape[layout.dim] == program.aten_shape(parent)[layout.dim]:
        program.layouts[node] = layout


def _convert(program, node, name, op):
    """The converted ``Step`` of a node computed from the input (its layout set), or a refusal."""
    torch = program.torch
    value = program.values[node]
    tensors = value if isinstance(value, (tuple, list)) else [value]
    if not all(isinstance(t, torch.Tensor) for t in tensors) or tensors[0].dtype != torch.float64:
        raise refuse(name, op, f"its value is {type(tensors[0]).__name__} {getattr(tensors[0], 'dtype', '')}; only "
                               "real (float64 in the check) tensors computed from the input are supported")
    key = "getitem" if node.target is operator.getitem else getattr(node.target, "__name__", str(node.target))
    entry = ATEN.get(key.split(".")[0])
    if entry is None:
        raise refuse(name, op, f"this ATen operation has no sparse restriction map; supported: {supported()}")
    _default_layout(program, node)
    step = entry.convert(entry.rule, program, node, name, op)
    if node not in program.layouts:
        raise refuse(name, op, f"it changes the shape {program.aten_shape(node.args[0])} to "
                               f"{program.aten_shape(node)} in a way that mixes the samples of the batch")
    return step


def _final(program, result):
    """``(node the network ends at, output activation)``: a final sigmoid, tanh or softmax over the features is
    the output activation."""
    kind = FINALS.get(getattr(result.target, "__name__", "").split(".")[0])
    if kind is None or not program.is_value(result.args[0]) or program.layout(result.args[0]) != STANDARD:
        return result, "identity"
    if kind == "softmax" and (len(program.aten_shape(result)) != 2 or result.args[1] not in (-1, 1)):
        return result, "identity"
    return result.args[0], kind


def _build(program, input_shape):
    """The builder of every node computing the output, and ``(output node, output activation)``."""
    (x,) = [n for n in program.nodes if n.op == "placeholder" and n.name == _user_input(program.ep)]
    builder = program.builder = GraphBuilder(input_shape, x)
    program.dependent.add(x)
    program.layouts[x] = STANDARD
    (output,) = [n for n in program.nodes if n.op == "output"]
    result = output.args[0][0]
    for node in program.nodes:
        if node.op != "call_function" or _skipped(node):
            continue
        _check_random(program.torch, node)
        if not any(program.is_value(a) for a in node.all_input_nodes):
            mark_constant(node)
            continue
        program.dependent.add(node)
        name, op = label(node), op_name(node)
        step = _convert(program, node, name, op)
        if step.rule is None:
            if step.parents:
                builder.elide(node, step.parents[0])
            continue
        try:
            emit(builder, node, name, op, step, program.shape, program.value)
        except ValueError as exc:
            if isinstance(exc, UnsupportedModelError):
                raise
            raise refuse(name, op, str(exc)) from None
    if not program.is_value(result):
        raise UnsupportedModelError("the model's output does not depend on its input: it computes no network")
    if program.layout(result) != STANDARD:
        raise UnsupportedModelError(f"the model's output holds the samples of the batch in dim "
                                    f"{program.layout(result).dim}; only outputs with the batch first are supported")
    return builder, _final(program, result)


def _user_input(ep):
    return next(s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT")


def graph_from_export(module, input_shape):
    """The :class:`~sheaflinalg.network.graph.Graph` of a PyTorch model read through ``torch.export`` (see
    ``Network.from_torch(method="export")``)."""
    torch, nn = import_torch()
    if not isinstance(module, nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if input_shape is None:
        raise ValueError("input_shape is required to export the model: pass the per-sample input shape without "
                         "the batch axis, e.g. input_shape=(8, 32) or (3, 32, 32)")
    input_shape = check_input_shape(input_shape)
    n_values = BATCH * math.prod(input_shape) * 4 + sum(p.numel() for p in module.parameters())
    check_memory(FLOAT * n_values, f"the export on inputs of shape {input_shape}", "check input_shape")
    (module64,) = float64_copies(torch, module)
    X = random_input(BATCH, input_shape)
    program = Program(torch, _export(torch, module64, X), X)
    with torch.no_grad():
        model_output = module64(torch.from_numpy(X))
    if not isinstance(model_output, torch.Tensor):
        raise ImportMismatchError(f"the PyTorch model returns {type(model_output).__name__}, where its export "
                                  "returns one tensor")
    builder, (result, output) = _build(program, input_shape)
    graph = builder.graph(result, output)
    reference = {name: program.layout(key).samples(program.tensor(key).numpy(), BATCH)
                 for name, key in builder.sources.items() if key in program.layouts}
    check_import(graph, X, reference, model_output.numpy(), "the PyTorch model (torch.export)",
                 "a forward hook, or another computation outside the exported program; remove it or write it with "
                 "supported layers")
    return graph


def graph_from_torch_by(module, input_shape=None, method="auto"):
    """The graph of a PyTorch model through torch.fx (``method="fx"``), ``torch.export`` (``"export"``) or,
    with ``"auto"``, torch.fx where it traces the model into supported operations and ``torch.export`` where
    it does not (:class:`~.torch_fx.TraceLimit`; the choice is logged at debug level)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if method == "fx":
        return graph_from_torch(module, input_shape)
    if method == "export":
        return graph_from_export(module, input_shape)
    try:
        return graph_from_torch(module, input_shape)
    except TraceLimit as fx_refusal:
        if input_shape is None:
            raise TraceLimit(f"{fx_refusal} (pass input_shape to read the model through torch.export)") from None
        LOG.debug("torch.fx does not read %s (%s); reading it through torch.export", type(module).__name__,
                  fx_refusal)
        try:
            return graph_from_export(module, input_shape)
        except UnsupportedModelError as exc:
            if isinstance(exc, ImportMismatchError):
                raise
            raise TraceLimit(f"{fx_refusal} (and through torch.export: {exc})") from None
