"""The linear plumbing (issue 32) imported from PyTorch and ONNX: a channel shuffle (view, transpose, view), a zero
padding before a convolution and a mean over the spatial axes before a linear layer, against torch's float64 forward
pass; the graph file keeps them; what is not plumbing (a mean over the batch, a padding by a constant) is refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import AfterConv, assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

SHAPE = (4, 5, 6)


class ShuffleNet(nn.Module):
    """Pad, convolve, shuffle the channels in 2 groups, pad again, convolve, average the positions, classify."""

    def __init__(self, functional=True, pad=True):
        super().__init__()
        torch.manual_seed(0)
        self.functional, self.padding = functional, pad
        self.conv1, self.conv2 = nn.Conv2d(4, 6, 3, groups=2), nn.Conv2d(6, 6, (2, 3))
        self.pad = nn.ZeroPad2d((1, 0, 2, 1))
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        if self.padding:
            x = F.pad(x, (1, 1, 1, 1)) if self.functional else self.pad(x)
        x = torch.relu(self.conv1(x))
        n, c, h, w = x.shape
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        if self.padding:
            x = F.pad(x, (0, 2)) if self.functional else self.pad(x)
        x = self.conv2(x).permute(0, 1, 3, 2)
        return self.head(x.mean(dim=(-1, 2), keepdim=False) if self.functional else torch.mean(x, (2, 3)))


def _check(net, model):
    X = np.random.default_rng(1).normal(size=(5,) + SHAPE)
    np.testing.assert_allclose(net.forward(X), reference(model.double().eval(), X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


@pytest.mark.parametrize("functional", [True, False])
def test_torch_plumbing_matches_torch_and_round_trips(tmp_path, functional):
    model = ShuffleNet(functional)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    ops = [node.op for node in net.graph.nodes]
    assert {"permute", "mean", "pad"} <= set(ops) and ops.count("permute") == 2
    X = _check(net, model)
    assert_round_trip(net, X, tmp_path / "net.npz")


@pytest.mark.parametrize("step, match", [
    (lambda x: x.mean(dim=0, keepdim=True), "batch axis"),
    (lambda x: x.mean() + x, "without dim"),
    (lambda x: x.permute(1, 0, 2), "batch axis"),
    (lambda x: x.transpose(0, 2), "batch axis"),
    (lambda x: F.pad(x, (1, 1), value=1.0), "only zero padding"),
    (lambda x: F.pad(x, (1, 1), mode="reflect"), "only zero padding"),
    (lambda x: F.pad(x, (1, 1, 1, 0)), "channel or batch axis"),
    (lambda x: F.pad(x, (-1, 1)), "negative pad crops")])
def test_torch_refuses_what_is_not_plumbing(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(AfterConv(step, 2), input_shape=(2, 5))


def test_onnx_export_of_the_shuffle_and_mean_matches_torch(tmp_path):
    """torch.onnx writes F.pad as shape arithmetic (ConstantOfShape, Slice): the padding is tested below."""
    pytest.importorskip("onnx")
    model, path = ShuffleNet(pad=False).double().eval(), str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + SHAPE, dtype=torch.float64),), path, dynamo=False,
                          input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    net = sl.Network.from_onnx(path)
    assert {"permute", "mean"} <= {node.op for node in net.graph.nodes}
    _check(net, model)


def _onnx_pad_mean(opset, value=0.0, perm=(0, 2, 1), mean_axes=(1,)):
    """Input (N, 2, 5) -> Pad (before 1, after 2 on the last axis) -> Transpose -> ReduceMean, in ``opset``'s form."""
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 2], dtype=np.int64), "pads"),
             numpy_helper.from_array(np.array(value), "value"),
             numpy_helper.from_array(np.array(mean_axes, dtype=np.int64), "axes")]
    pad = (helper.make_node("Pad", ["x", "pads", "value"], ["p"]) if opset >= 11 else
           helper.make_node("Pad", ["x"], ["p"], pads=[0, 0, 1, 0, 0, 2], value=value))
    mean = (helper.make_node("ReduceMean", ["t", "axes"], ["y"], keepdims=0) if opset >= 18 else
            helper.make_node("ReduceMean", ["t"], ["y"], axes=list(mean_axes), keepdims=0))
    nodes = [pad, helper.make_node("Transpose", ["p"], ["t"], perm=list(perm)), mean]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [10, 13, 18])
def test_onnx_pad_transpose_and_reduce_mean_match_their_definitions(tmp_path, opset):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_pad_mean(opset), path)
    net = sl.Network.from_onnx(path)
    assert [node.op for node in net.graph.nodes] == ["pad", "permute", "mean"]
    X = np.random.default_rng(2).normal(size=(4, 2, 5))
    expected = np.pad(X, ((0, 0), (0, 0), (1, 2))).transpose(0, 2, 1).mean(axis=1)
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("options, match", [({"value": 1.0}, "only zero padding"),
                                            ({"perm": (1, 0, 2)}, "holds the samples of the batch"),
                                            ({"mean_axes": (0, 1)}, "batch axis")])
def test_onnx_refuses_what_is_not_plumbing(tmp_path, options, match):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_pad_mean(13, **options), path)
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(path)
