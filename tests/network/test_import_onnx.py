"""Network.from_onnx: torch models exported with torch.onnx (legacy exporter) against torch's float64 forward,
graphs written with onnx.helper against the ONNX operators' definitions, and crafted files refused by name."""

import os
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import architectures, build, mnist1d_cnn, reference, small_resnet  # noqa: E402
import sheaflinalg as sl  # noqa: E402


def _export(model, input_shape, path, dynamic=True, fold=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + tuple(input_shape), dtype=torch.float64),), path,
                          dynamo=False, input_names=["input"], output_names=["output"], do_constant_folding=fold,
                          dynamic_axes={"input": {0: "batch"}} if dynamic else None)
    return path


def _check(net, model, input_shape, n=3, seed=0):
    X = np.random.default_rng(seed).normal(size=(n,) + tuple(input_shape))
    expected = reference(model, X)
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(net.forward(X.reshape(n, -1)), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=10)
@given(architectures(max_blocks=3))
def test_exported_random_cnns_match_torch(tmp_path_factory, arch):
    spec, input_shape = arch
    assume(spec["head"]["pool"] != 2)          # torch.onnx exports adaptive pools only to sizes dividing the input
    model = build(spec, input_shape, seed=3)
    path = _export(model, input_shape, str(tmp_path_factory.mktemp("onnx") / "m.onnx"))
    net = sl.Network.from_onnx(path)
    assert net.input_shape == input_shape and net.output == spec["head"]["output"]
    _check(net, model, input_shape)


def test_exported_mnist1d_cnn_resnet_and_batch_norm_match_torch(tmp_path):
    for model, shape, dynamic in ((mnist1d_cnn(), (1, 40), True), (small_resnet(), (3, 8, 8), True),
                                  (small_resnet(), (3, 8, 8), False)):
        net = sl.Network.from_onnx(_export(model, shape, str(tmp_path / "m.onnx"), dynamic))
        _check(net, model, shape)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(3 * 4 * 4, 2))
    with torch.no_grad():
        model[2].running_mean.uniform_(-1, 1)
        model[2].running_var.uniform_(0.5, 2)
    model = model.double().eval()
    net = sl.Network.from_onnx(_export(model, (2, 6, 6), str(tmp_path / "bn.onnx")))
    assert "batchnorm" in net.graph_ops                   # not folded into the convolution: it follows a ReLU
    _check(net, model, (2, 6, 6))


def _tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _value(name, shape, elem=TensorProto.DOUBLE):
    return helper.make_tensor_value_info(name, elem, ["m"] if shape is None else shape)


def _save(model, tmp_path, name="m.onnx"):
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def test_helper_graphs_match_the_operator_definitions(tmp_path):
    """Gemm with transB=0, alpha and beta; MatMul + Add (the bias folded); LeakyRelu; Reshape by a Constant;
    AveragePool without the padding in its divisor; Concat and Add of two branches; a final Softmax."""
    rng = np.random.default_rng(0)
    B, C = rng.normal(size=(6, 8)), rng.normal(size=(8,))
    M, b = rng.normal(size=(8, 8)), rng.normal(size=(8,))
    shape = np.array([0, 2, 4], dtype=np.int64)
    nodes = [helper.make_node("Gemm", ["x", "B", "C"], ["g"], alpha=0.5, beta=2.0, name="gemm"),
             helper.make_node("LeakyRelu", ["g"], ["l"], alpha=0.3, name="leaky"),
             helper.make_node("MatMul", ["l", "M"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["mb"], name="bias"),
             helper.make_node("Constant", [], ["shape"], value=_tensor("s", shape), name="const"),
             helper.make_node("Reshape", ["mb", "shape"], ["r"], name="reshape"),
             helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[3], pads=[1, 1], name="pool"),
             helper.make_node("Concat", ["r", "p"], ["c"], axis=-1, name="cat"),
             helper.make_node("Add", ["c", "c"], ["cc"], name="sum"),
             helper.make_node("Flatten", ["cc"], ["f"], axis=1, name="flat"),
             helper.make_node("Softmax", ["f"], ["y"], axis=-1, name="softmax")]
    model = _model(nodes, [_value("x", ["n", 6])], [_value("y", ["n", 16])],
                   [_tensor("B", B), _tensor("C", C), _tensor("M", M), _tensor("b", b)])
    net = sl.Network.from_onnx(_save(model, tmp_path))
    X = rng.normal(size=(5, 6))
    g = 0.5 * X @ B + 2.0 * C
    slope = float(np.float32(0.3))                # ONNX attributes are float32
    r = (np.where(g >= 0, g, slope * g) @ M + b).reshape(5, 2, 4)
    padded = np.pad(r, ((0, 0), (0, 0), (1, 1)))
    counts = np.array([2, 3, 3, 2])
    p = np.stack([padded[:, :, i:i + 3].sum(axis=-1) for i in range(4)], axis=-1) / counts
    f = 2 * np.concatenate([r, p], axis=-1).reshape(5, -1)
    expected = np.exp(f - f.max(axis=1, keepdims=True))
    np.testing.assert_allclose(net.forward(X), expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)
    assert [n.name for n in net.graph.nodes] == ["gemm", "leaky", "mm", "reshape", "pool", "cat", "sum", "flat"]


def _one_node(op, attrs=None, shape=(1, 2, 6), inputs=(), opset=17, out_shape=None, name="n"):
    node = helper.make_node(op, ["x"] + [i for i, _ in inputs], ["y"], name=name, **(attrs or {}))
    return _model([node], [_value("x", list(shape))], [_value("y", out_shape)], [_tensor(i, a) for i, a in inputs],
                  opset)


W3 = np.ones((2, 2, 3))
REFUSED = [
    (_one_node("Erf"), r"node 'n' \(Erf\) is not supported: an Erf is supported only inside GELU's pattern"),
    (_one_node("Sin"), r"node 'n' \(Sin\) is not supported: op_type 'Sin'"),
    (_one_node("Conv", {"pads": [1, 0]}, inputs=[("W", W3)]), r"'n' \(Conv\).*padding begins \[1\] and ends \[0\]"),
    (_one_node("MaxPool", {"kernel_shape": [2], "ceil_mode": 1, "auto_pad": "SAME_UPPER"}),
     r"'n' \(MaxPool\).*ceil_mode=1 with auto_pad"),
    (_one_node("Reshape", inputs=[("s", np.array([-1], dtype=np.int64))]),
     r"output .* holds the samples of the batch in axis 0"),
    (_one_node("Concat", {"axis": 0}), r"'n' \(Concat\).*batch axis"),
    (_one_node("Flatten", {"axis": 2}), r"'n' \(Flatten\).*axis=2"),
    (_model([helper.make_node("Softmax", ["x"], ["s"], name="sm", axis=0), helper.make_node("Relu", ["s"], ["y"])],
            [_value("x", [1, 3])], [_value("y", None)]), r"'sm' \(Softmax\).*axis=0 is the batch axis"),
    (_model([helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0),
             helper.make_node("Mul", ["x", "m"], ["y"], name="n")], [_value("x", [1, 2, 3])], [_value("y", None)]),
     r"'n' \(Mul\).*ranks \[3, 2\]"),
    (_model([helper.make_node("Gelu", ["x"], ["y"], name="g", domain="com.example")], [_value("x", [1, 3])],
            [_value("y", None)]), r"'g' \(com.example.Gelu\)"),
    (_one_node("Add", shape=(1, 3, 3), inputs=[("mask", np.triu(np.full((3, 3), -np.inf), 1))]),
     r"'n' \(Add\).*causal mask to values not read by a Softmax alone"),
]


@pytest.mark.parametrize("model, match", REFUSED, ids=[m for _, m in REFUSED])
def test_unsupported_nodes_are_refused_naming_node_and_op(tmp_path, model, match):
    if model.graph.node[0].domain:
        model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(_save(model, tmp_path))


def test_bad_files_are_refused_naming_the_file(tmp_path):
    good = _save(_one_node("Relu"), tmp_path, "good.onnx")
    data = open(good, "rb").read()
    (tmp_path / "random.onnx").write_bytes(np.random.default_rng(0).bytes(300))
    (tmp_path / "truncated.onnx").write_bytes(data[:len(data) // 2])
    (tmp_path / "text.onnx").write_text("this is not a model\n")
    for name in ("random.onnx", "truncated.onnx", "text.onnx"):
        with pytest.raises(ValueError, match=f"{name}: not a valid ONNX model"):
            sl.Network.from_onnx(str(tmp_path / name))
    with pytest.raises(FileNotFoundError, match="missing.onnx: no such file"):
        sl.Network.from_onnx(str(tmp_path / "missing.onnx"))
    with pytest.raises(TypeError, match="path must be a file name"):
        sl.Network.from_onnx(3)
    cases = [(_one_node("Relu", opset=6), "unsupported opset 6"),
             (_model([helper.make_node("Add", ["x", "z"], ["y"])], [_value("x", [1, 3]), _value("z", [1, 3])],
                     [_value("y", None)]), r"2 input\(s\) and 1 output\(s\)"),
             (_one_node("Relu", shape=["n", "c", 6]), r"input 'x' has shape \['n', 'c', 6\].*dynamic shapes"),
             (_one_node("Relu", shape=[1, 3], out_shape=None).__class__(), "not a valid ONNX model")]
    cases[-1][0].CopyFrom(_one_node("Relu"))
    cases[-1][0].graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
    cases[-1] = (cases[-1][0], "not a floating-point tensor")
    for model, match in cases:
        path = _save(model, tmp_path)
        with pytest.raises(ValueError, match=match) as info:
            sl.Network.from_onnx(path)
        assert os.path.basename(path) in str(info.value)


def test_shape_arithmetic_constants_a_causal_mask_and_float32_attributes_are_read_exactly(tmp_path):
    """Attention's scale from the shape (Shape, Slice, Cast, Sqrt, Div) and its causal mask (Expand, Trilu,
    Equal, Where) as torch.onnx writes them; an Identity of an initializer; HardSigmoid's alpha float32(1/6)."""
    ints, one = (lambda *v: np.array(v, dtype=np.int64)), np.ones(1)
    nodes = [helper.make_node("Identity", ["w"], ["w2"]),
             helper.make_node("Mul", ["x", "w2"], ["h"]),
             helper.make_node("HardSigmoid", ["h"], ["g"], alpha=float(np.float32(1 / 6))),
             helper.make_node("Shape", ["g"], ["s"]),
             helper.make_node("Slice", ["s", "minus1", "big"], ["d"]),
             helper.make_node("Cast", ["d"], ["df"], to=TensorProto.DOUBLE),
             helper.make_node("Sqrt", ["df"], ["r"]),
             helper.make_node("Div", ["one", "r"], ["scale"]),
             helper.make_node("Slice", ["s", "minus2", "minus1"], ["t"]),
             helper.make_node("Concat", ["t", "t"], ["tt"], axis=0),
             helper.make_node("Expand", ["one", "tt"], ["ones"]),
             helper.make_node("Trilu", ["ones"], ["low"], upper=0),
             helper.make_node("Equal", ["low", "zero"], ["above"]),
             helper.make_node("Where", ["above", "inf", "zero"], ["mask"]),
             helper.make_node("Mul", ["g", "scale"], ["z"]),
             helper.make_node("Add", ["z", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             helper.make_node("Flatten", ["p"], ["y"], axis=1)]
    consts = [_tensor("w", np.full((4, 4), 3.0)), _tensor("one", one), _tensor("zero", 0 * one),
              _tensor("inf", -np.inf * one), _tensor("minus1", ints(-1)), _tensor("minus2", ints(-2)),
              _tensor("big", ints(2 ** 62))]
    net = sl.Network.from_onnx(_save(_model(nodes, [_value("x", ["n", 4, 4])], [_value("y", ["n", 16])], consts),
                                     tmp_path))
    assert [n.attrs for n in net.graph.nodes if n.op in ("clamp", "softmax")] == [
        {"min": 0.0, "max": 1.0, "slope": 1 / 6, "offset": 0.5}, {"axis": 1, "causal": True}]
    X = np.random.default_rng(0).normal(size=(3, 4, 4))
    z = np.clip(3 * X / 6 + 0.5, 0, 1) / 2.0
    z = np.where(np.triu(np.ones((4, 4)), 1) > 0, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(net.forward(X), (p / p.sum(axis=-1, keepdims=True)).reshape(3, -1), rtol=1e-14)


class _WindowPad(nn.Module):
    """Swin's padding to whole windows on channels-last values: pads computed from the size (``(w - W % w) % w``,
    written as Shape, Mod, Concat, Reshape, Slice, Transpose nodes) on the first per-sample axis."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(2, 3, 1)

    def forward(self, x):
        x = self.conv(x).permute(0, 2, 3, 1)
        height, width = x.shape[1], x.shape[2]
        return F.pad(x, (0, 0, 0, (4 - width % 4) % 4, 0, (4 - height % 4) % 4)).flatten(1)


class _TableBias(nn.Module):
    """Swin V2's relative-position bias: an MLP on a constant table, gathered by a constant index, squashed,
    added to a value: nodes reading constants alone (in Swin V2's export; here where the exporter does not fold
    constants), folded into one constant."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear, self.mlp = nn.Linear(6, 6), nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 3))
        self.register_buffer("table", torch.randn(4, 2))
        self.register_buffer("index", torch.tensor([3, 1]))

    def forward(self, x):
        return self.linear(x) + 16 * torch.sigmoid(self.mlp(self.table)[self.index].reshape(6))


@pytest.mark.parametrize("model, shape, ops", [(_WindowPad, (2, 5, 6), ["conv", "permute", "permute", "pad",
                                                                       "permute", "reshape"]),
                                               (_TableBias, (6,), ["linear", "affine"])])
def test_computed_pads_on_channels_last_values_and_constants_computed_from_constants_match_torch(tmp_path, model,
                                                                                               shape, ops):
    model = model().double().eval()
    path = _export(model, shape, str(tmp_path / "m.onnx"), fold=False)
    written = {node.op_type for node in onnx.load(path).graph.node}
    assert {"Mod", "Pad"} <= written if model.__class__ is _WindowPad else {"Gather", "Sigmoid"} <= written
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes] == ops
    _check(net, model, shape)
