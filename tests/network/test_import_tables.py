"""The importers' tables: every framework name maps to a registered op rule in one table per importer, the
refusal of an unsupported operation lists what those tables hold, and an op's name is written in few modules."""

import ast
import re

import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402
from torch import nn  # noqa: E402

from helpers.paths import PACKAGE  # noqa: E402
import sheaflinalg as sl  # noqa: E402
from sheaflinalg.network.importers import onnx_graph, torch_table  # noqa: E402
from sheaflinalg.network.importers.builder import Entry  # noqa: E402
from sheaflinalg.network.ops import RULES  # noqa: E402

#: The one package module that writes op names beyond their rules: the torch table, whose tensor methods
#: ``"relu"``, ``"add"``, ``"reshape"``, ``"permute"`` and ``"mean"`` share the ops' names (the ONNX table writes its ops as rules).
TORCH_TABLE = "network/importers/torch_table.py"
ATEN_TABLE = "network/importers/aten_table.py"


def _tables():
    table = torch_table.TorchTable(torch)
    return {"torch modules": table.modules, "torch functions": table.functions, "tensor methods": table.methods,
            "ONNX": onnx_graph.OPS}


@pytest.mark.parametrize("kind", list(_tables()))
def test_every_table_entry_names_a_registered_rule(kind):
    entries = _tables()[kind]
    assert entries
    for key, entry in entries.items():
        assert isinstance(entry, Entry) and callable(entry.convert), key
        assert entry.rule is None or RULES.get(entry.rule.name) is entry.rule, (key, entry.rule)


def test_the_tables_cover_the_importers_ops():
    """What each importer supported before its table (a name dropped from a table fails here)."""
    reached = {kind: {e.rule.name for e in entries.values() if e.rule is not None}
               for kind, entries in _tables().items()}
    assert reached["torch modules"] | reached["torch functions"] | reached["tensor methods"] == set(RULES)
    # torch.roll is exported as slices and a concat (F.normalize: its pattern, onnx_patterns)
    assert reached["ONNX"] == set(RULES) - {"roll"}
    # x.matmul(W) with a parameter W is a linear layer, reached through matmul's entry
    assert reached["tensor methods"] == {"reshape", "relu", "add", "permute", "mean", "slice", "sum", "sigmoid", "tanh",
                                         "affine", "roll", "constant", "clamp", "mul", "matmul", "softmax"}


def _torch_refusal():
    with pytest.raises(sl.UnsupportedModelError) as info:
        sl.Network.from_torch(nn.Sequential(nn.Linear(2, 3), nn.Hardshrink()))
    return str(info.value)


def test_the_torch_refusal_lists_the_table():
    message = _torch_refusal()
    table = torch_table.TorchTable(torch)
    names = [cls.__name__ for cls in table.modules] + [f.__name__ for f in table.functions] + list(table.methods)
    assert all(re.search(rf"\b{name}\b", message) for name in names)
    assert "a final Sigmoid, Tanh or Softmax" in message


def test_the_torch_refusal_is_read_off_the_table(monkeypatch):
    monkeypatch.setattr(torch_table, "METHODS", {**torch_table.METHODS, "frobnicate": torch_table.METHODS["add"]})
    assert ("tensor methods view, reshape, flatten, contiguous, relu, relu_, add, permute, transpose, mean, "
            "narrow, chunk, split, sum, sigmoid, tanh, add_, sub, sub_, mul, mul_, div, div_, matmul, roll, expand, "
            "expand_as, clone, type_as, clamp, clip, bmm, softmax, frobnicate;") in _torch_refusal()


def _onnx_refusal(tmp_path):
    graph = helper.make_graph([helper.make_node("Sin", ["x"], ["y"], name="n")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    path = tmp_path / "sin.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(sl.UnsupportedModelError) as info:
        sl.Network.from_onnx(str(path))
    return str(info.value)


def test_the_onnx_refusal_lists_the_table(tmp_path, monkeypatch):
    message = _onnx_refusal(tmp_path)
    assert f"supported: {', '.join(sorted(onnx_graph.OPS))} and a final Sigmoid, Tanh or Softmax" in message
    monkeypatch.setattr(onnx_graph, "OPS", {**onnx_graph.OPS, "Frobnicate": onnx_graph.OPS["Relu"]})
    monkeypatch.setattr(onnx_graph, "FINALS", {"Sigmoid": "sigmoid"})
    assert "Flatten, Frobnicate, Gather, Gelu, Gemm" in _onnx_refusal(tmp_path)
    assert _onnx_refusal(tmp_path).endswith("and a final Sigmoid")


def string_literals(source):
    """The string constants of ``source``'s code (docstrings of modules, classes and functions left out)."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs}


def test_string_literals_are_code_only():
    source = '"""relu."""\nclass A:\n    """conv."""\n    def f(self):\n        """add."""\n        return "maxpool"\n'
    assert string_literals(source) == {"maxpool"}


def _writers():
    """``{op name: [package modules whose code writes it as a string]}``."""
    literals = {str(path.relative_to(PACKAGE)): string_literals(path.read_text()) for path in PACKAGE.rglob("*.py")}
    return {op: sorted(module for module, strings in literals.items() if op in strings) for op in RULES}


def test_an_op_name_is_written_in_its_rule_and_the_tables_at_most():
    """Issue 30: an op's name is written in at most four package modules (its rule, the importers' tables and
    the graph file format).  Here: its rule, and the torch table as a tensor method's name; the file format
    reads the registry, the converters are handed their rules (sklearn's activation ``"relu"`` and the
    reproduction's layer label ``"linear"``, a spectrum summary's statistic ``"mean"``, the skip encoding
    ``skip_encoding="sum"`` of the sheaf modules, the padding mode ``"constant"`` of the importers and the
    learning-rate schedule ``"constant"`` and the upsampling mode ``"linear"`` are not op names)."""
    # ... and the warm-up's small network, built node by node (a use of the ops, as in the README)
    not_op_names = {"network/importers/sklearn_mlp.py", "reproduce/mnist1d_cnn.py", "commands/warmup.py"}
    skip_encoding = {"sheaf/assembled/assembly.py", "sheaf/assembled/system.py", "sheaf/assembled/augmented.py",
                     "sheaf/layout.py", "sheaf/skip_edges/encoding.py", "sheaf/skip_edges/least_squares.py",
                     "sheaf/verification/verify.py", "sheaf/matrix_free/bound.py", "sheaf/matrix_free/residuals.py",
                     "sheaf/pins/completion.py", "dynamics/heat.py", "dynamics/problem.py"}
    # sigmoid, tanh and softmax are also the output activations phi (and "tanh" GELU's approximation)
    outputs = {"dynamics/implicit/system.py", "kernels/potentials.py", "network/activations.py", "network/importers/onnx_graph.py",
               "network/importers/sklearn_mlp.py", "reproduce/convergence.py", "sheaf/matrix_free/residuals.py",
               "tasks.py", "training/losses.py", "training/sgd.py"}
    upsampling_mode = {"network/ops/upsample.py", "network/importers/onnx_ops.py", "network/importers/torch_modules.py",
                       "network/importers/aten_layers.py"}
    other_meanings = {"mean": {"spectral/result.py"}, "sum": skip_encoding, "sigmoid": outputs,
                      "tanh": outputs | {"network/ops/gelu.py", "network/importers/onnx_patterns.py"},
                      "linear": upsampling_mode | {"reproduce/case_vit.py"},   # names a ViT's q/k/v projections
                      "constant": {"network/importers/onnx_graph.py", "network/importers/torch_modules.py",
                                   "network/importers/aten_layers.py",
                                   "training/optim/choose.py", "training/optim/schedules.py"},
                      "mul": {"network/importers/builder.py", "network/importers/torch_affine.py",   # affine kinds
                              "network/importers/aten_products.py"},
                      "add": {"network/importers/aten_products.py"},
                      "matmul": {"discord/heads.py", "reproduce/case_vit.py"},   # find attention's products     # the kind of an ATen add
                      "clamp": {"network/importers/aten_normalize.py"},  # the ATen clamp of F.normalize's pattern
                      "softmax": outputs | {"discord/pinning/analysis.py", "network/graph/graph.py", "network/model.py",
                                            "network/importers/torch_fx.py", "network/importers/torch_export.py",
                                            "sheaf/patterns.py", "spectral/drivers.py",
                                            "spectral/operators/graph_systems.py",
                                            "sheaf/assembled/assembly.py",   # the output activation's Jacobian
                                            "discord/heads.py", "reproduce/case_vit.py"}}   # find attention
    for op, modules in _writers().items():
        modules = set(modules) - other_meanings.get(op, set())
        assert len(modules) <= 5, (op, modules)
        assert f"network/ops/{op}.py" in modules, op
        others = modules - {f"network/ops/{op}.py", TORCH_TABLE, ATEN_TABLE} - not_op_names
        assert not others, (op, others)
