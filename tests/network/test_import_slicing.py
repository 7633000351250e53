"""Slices (issue 32) imported from PyTorch and ONNX: ShuffleNet-v2's channel split (chunk, split, narrow and
``x[:, a:b]``) against torch's float64 forward pass, ONNX Slice and Split against their definitions, the graph file
keeping them; integer indices, the batch axis and backward steps refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from helpers.torch_models import AfterConv, assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

SHAPE = (6, 5, 4)


class SplitBlock(nn.Module):
    """ShuffleNet-v2's unit: split the channels, convolve one half, concatenate, then slice the positions."""

    def __init__(self, how):
        super().__init__()
        torch.manual_seed(0)
        self.how, self.conv = how, nn.Conv2d(3, 3, 3, padding=1)
        self.head = nn.Linear(6 * 2 * 4, 3)

    def forward(self, x):
        if self.how == "chunk":
            a, b = x.chunk(2, dim=1)
        elif self.how == "split":
            a, b = torch.split(x, [3, 3], 1)
        elif self.how == "narrow":
            a, b = x.narrow(1, 0, 3), torch.narrow(x, -3, 3, 3)
        else:
            a, b = x[:, :3], x[:, 3:]
        y = torch.cat([a, torch.relu(self.conv(b))], dim=1)
        return self.head(y[:, :, 1:5:2].flatten(1))


def _check(net, model, shape=SHAPE):
    X = np.random.default_rng(1).normal(size=(5,) + shape)
    np.testing.assert_allclose(net.forward(X), reference(model.double().eval(), X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


@pytest.mark.parametrize("how", ["chunk", "split", "narrow", "getitem"])
def test_torch_slices_match_torch_and_round_trip(tmp_path, how):
    model = SplitBlock(how)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    slices = [node.attrs for node in net.graph.nodes if node.op == "slice"]
    assert slices == [{"axis": 0, "start": 0, "stop": 3, "step": 1}, {"axis": 0, "start": 3, "stop": 6, "step": 1},
                      {"axis": 1, "start": 1, "stop": 5, "step": 2}]
    X = _check(net, model)
    assert_round_trip(net, X, tmp_path / "net.npz")


@pytest.mark.parametrize("step, match", [
    (lambda x: x[:, 1], "integer"),
    (lambda x: x[1:], "full batch axis"),
    (lambda x: x[:, 1:, 2:], "one axis at a time"),
    (lambda x: x.narrow(0, 0, 1), "batch axis"),
    (lambda x: x[:, 3:1], "empty"),
    (lambda x: torch.cat(x.chunk(2, 1), 1), "indexing its result")])
def test_torch_refuses_what_is_not_a_slice(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(AfterConv(step, 4), input_shape=(4, 5))


def test_onnx_export_of_the_split_block_matches_torch(tmp_path):
    pytest.importorskip("onnx")
    model, path = SplitBlock("getitem").double().eval(), str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + SHAPE, dtype=torch.float64),), path, dynamo=False,
                          input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes].count("slice") == 3
    _check(net, model)


def _onnx_split_slice(opset, starts=(1, -4), ends=(2 ** 62, 5), axes=(2, -1), steps=(1, 2)):
    """Input (N, 4, 5, 6) -> Split (channels 1 + 3) -> Slice of the second piece -> Concat of both flattened."""
    from onnx import TensorProto, helper, numpy_helper
    ints = {"starts": starts, "ends": ends, "axes": axes, "steps": steps, "split": (1, 3)}
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), k) for k, v in ints.items()]
    split = (helper.make_node("Split", ["x", "split"], ["a", "b"], axis=1) if opset >= 13 else
             helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]))
    cut = (helper.make_node("Slice", ["b", "starts", "ends", "axes", "steps"], ["c"]) if opset >= 10 else
           helper.make_node("Slice", ["b"], ["c"], starts=list(starts), ends=list(ends), axes=list(axes)))
    nodes = [split, cut, helper.make_node("Flatten", ["a"], ["fa"]), helper.make_node("Flatten", ["c"], ["fc"]),
             helper.make_node("Concat", ["fa", "fc"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 4, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [9, 13])
def test_onnx_split_and_slice_match_their_definitions(tmp_path, opset):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    steps = (1, 2) if opset >= 10 else (1, 1)
    onnx.save(_onnx_split_slice(opset, steps=steps), path)
    net = sl.Network.from_onnx(path)
    X = np.random.default_rng(2).normal(size=(3, 4, 5, 6))
    expected = np.concatenate([X[:, :1].reshape(3, -1), X[:, 1:, 1:, 2:5:steps[1]].reshape(3, -1)], axis=1)
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)
    assert [node.op for node in net.graph.nodes].count("slice") == 4
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("options, match", [({"axes": (0, 3)}, "batch axis"),
                                            ({"steps": (1, -1)}, "steps backwards")])
def test_onnx_refuses_what_is_not_a_slice(tmp_path, options, match):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_split_slice(13, **options), path)
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(path)
