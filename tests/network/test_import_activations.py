"""The smooth activations imported from ONNX (issue "every network people train"): torch models exported at
opsets 13, 17 and 20 (GELU's Erf and tanh patterns, SiLU's x * Sigmoid(x), Mish's x * Tanh(Softplus(x)),
HardSwish's x * HardSigmoid(x), Softplus(beta x) / beta matched into one node each) against torch's float64
forward pass, helper-built graphs of every operator against its definition, and refusals (an Erf outside
GELU's pattern, a pattern whose inner value is read elsewhere, Swish with alpha != 1)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from scipy.special import erf, expit  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import export_onnx, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

#: ``{name: (module, op, attrs)}``: every smooth activation as torch writes it, and the node it becomes.
ACTIVATIONS = {"sigmoid": (nn.Sigmoid(), "sigmoid", {}), "tanh": (nn.Tanh(), "tanh", {}),
               "gelu": (nn.GELU(), "gelu", {"approximate": "none"}),
               "gelu_tanh": (nn.GELU(approximate="tanh"), "gelu", {"approximate": "tanh"}),
               "silu": (nn.SiLU(), "silu", {}), "mish": (nn.Mish(), "mish", {}),
               "softplus": (nn.Softplus(), "softplus", {"beta": 1.0}),
               "softplus_beta": (nn.Softplus(beta=2.0, threshold=50.0), "softplus", {"beta": 2.0}),
               "elu": (nn.ELU(alpha=0.5), "elu", {"alpha": 0.5}), "hardswish": (nn.Hardswish(), "hardswish", {})}


def _model(activation):
    """Linear, the activation, Linear (an interior activation), in float64."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), activation, nn.Linear(5, 2)).double().eval()


@pytest.mark.parametrize("opset", [13, 17, 20])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_an_exported_activation_is_one_node_matching_torch(tmp_path, name, opset):
    module, op, attrs = ACTIVATIONS[name]
    model, path = _model(module), str(tmp_path / "m.onnx")
    export_onnx(model, (3,), path, opset)
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes] == ["linear", op, "linear"]
    assert {k: v for k, v in net.graph.nodes[1].attrs.items() if k != "threshold"} == attrs
    X = np.random.default_rng(1).normal(size=(6, 3)) * 4
    np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed


def test_a_final_sigmoid_stays_the_output_activation(tmp_path):
    model, path = nn.Sequential(_model(nn.Tanh()), nn.Sigmoid()), str(tmp_path / "m.onnx")
    export_onnx(model, (3,), path, 17)
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes] == ["linear", "tanh", "linear"] and net.output == "sigmoid"


def _graph(nodes, constants=(), opset=20, inputs=("x",)):
    """A model of ``nodes`` reading ``x`` (batch, 4) and writing ``y``, with scalar float32 ``constants``."""
    initializers = [numpy_helper.from_array(np.array(v, dtype=np.float32), name) for name, v in constants]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", 4])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _import(tmp_path, model):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return sl.Network.from_onnx(path)


def _softplus(z):
    return np.logaddexp(0.0, z)


#: ``(operator, attributes, opset, definition)`` of every operator, the definitions from the ONNX operator docs.
OPERATORS = [
    ("Sigmoid", {}, 13, expit), ("Tanh", {}, 13, np.tanh),
    ("Gelu", {}, 20, lambda z: 0.5 * z * (1 + erf(z / np.sqrt(2)))),
    ("Gelu", {"approximate": "tanh"}, 20,
     lambda z: 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))),
    ("Softplus", {}, 13, _softplus), ("Elu", {"alpha": 0.25}, 13, lambda z: np.where(z > 0, z, 0.25 * np.expm1(z))),
    ("Elu", {}, 13, lambda z: np.where(z > 0, z, np.expm1(z))),
    ("Mish", {}, 18, lambda z: z * np.tanh(_softplus(z))),
    ("HardSwish", {}, 14, lambda z: z * np.clip(z / 6 + 0.5, 0, 1)),
    ("Swish", {}, 24, lambda z: z * expit(z)),
]


@pytest.mark.parametrize("op_type, attrs, opset, definition", OPERATORS)
def test_every_operator_matches_its_definition(tmp_path, op_type, attrs, opset, definition):
    net = _import(tmp_path, _graph([helper.make_node(op_type, ["x"], ["h"], **attrs),
                                    helper.make_node("Relu", ["h"], ["y"])], opset=opset))
    X = np.random.default_rng(2).normal(size=(5, 4)) * 5
    X[0, :2] = [40.0, -40.0]                     # far out: softplus has no linear piece in ONNX
    np.testing.assert_allclose(net.forward(X), np.maximum(definition(X), 0), rtol=1e-12, atol=1e-13)
    assert sl.verify(net, X).passed


def _gelu_nodes(div="Div", erf_input="d"):
    return [helper.make_node(div, ["x", "s"], ["d"]), helper.make_node("Erf", [erf_input], ["e"]),
            helper.make_node("Add", ["one", "e"], ["a"]), helper.make_node("Mul", ["half", "x"], ["h"]),
            helper.make_node("Mul", ["a", "h"], ["g"]), helper.make_node("Relu", ["g"], ["y"])]


@pytest.mark.parametrize("div, scale", [("Div", np.sqrt(2)), ("Mul", 1 / np.sqrt(2))])
def test_gelu_patterns_match_in_any_grouping(tmp_path, div, scale):
    """``(0.5 x) * (1 + Erf(x / sqrt 2))`` (another grouping than torch's), the scale as a Div or a Mul."""
    net = _import(tmp_path, _graph(_gelu_nodes(div), [("s", scale), ("one", 1.0), ("half", 0.5)], opset=13))
    assert [node.op for node in net.graph.nodes] == ["gelu", "relu"]
    X = np.random.default_rng(3).normal(size=(4, 4))
    np.testing.assert_allclose(net.forward(X), np.maximum(0.5 * X * (1 + erf(X / np.sqrt(2))), 0), rtol=1e-7)


@pytest.mark.parametrize("nodes, constants, match", [
    ([helper.make_node("Erf", ["x"], ["y"], name="lonely")], [], "node 'lonely' \\(Erf\\).*only inside GELU"),
    (_gelu_nodes()[:5] + [helper.make_node("Add", ["g", "d"], ["y"])],      # x / sqrt 2 read outside the pattern
     [("s", np.sqrt(2)), ("one", 1.0), ("half", 0.5)], "Erf.*only inside GELU"),
    (_gelu_nodes()[:5] + [helper.make_node("Relu", ["g"], ["y"])], [("s", 1.5), ("one", 1.0), ("half", 0.5)],
     "Erf.*only inside GELU"),                                                   # not sqrt 2
    ([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Div", ["x", "s"], ["m"]),
      helper.make_node("Add", ["m", "s"], ["y"])], [], "node 'm' \\(Div\\).*combines two values"),
    ([helper.make_node("Swish", ["x"], ["y"], alpha=2.0)], [], "only x \\* sigmoid\\(x\\)"),
    ([helper.make_node("Clip", ["x", "lo"], ["y"])], [("lo", 0.0)], "only a clip with both bounds"),
])
def test_what_is_not_an_activation_is_refused(tmp_path, nodes, constants, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        _import(tmp_path, _graph(nodes, constants, opset=24))
