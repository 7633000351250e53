"""Nearest upsampling and sums (issue 32) imported from PyTorch and ONNX: a U-Net-like decoder (downsample,
upsample, join the skip) and a sum over the positions against torch's float64 forward pass, the graph file keeping
them; other modes and non-integer factors refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import AfterConv, assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

SHAPE = (2, 4, 6)


class UNet(nn.Module):
    """Convolve, pool by 2, convolve, upsample by 2 (``how``), join the skip, convolve, classify."""

    def __init__(self, how):
        super().__init__()
        torch.manual_seed(0)
        self.how, self.up = how, nn.Upsample(scale_factor=2)
        self.down, self.bottom = nn.Conv2d(2, 3, 3, padding=1), nn.Conv2d(3, 3, 1)
        self.out, self.head = nn.Conv2d(6, 2, 3, padding=1), nn.Linear(2 * 4 * 6, 3)

    def forward(self, x):
        skip = torch.relu(self.down(x))
        y = self.bottom(F.max_pool2d(skip, 2))
        if self.how == "module":
            y = self.up(y)
        elif self.how == "factor":
            y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        else:
            y = F.interpolate(y, size=(4, 6))
        return self.head(self.out(torch.cat([skip, y], 1)).flatten(1))


def _check(net, model):
    X = np.random.default_rng(1).normal(size=(5,) + SHAPE)
    np.testing.assert_allclose(net.forward(X), reference(model.double().eval(), X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


@pytest.mark.parametrize("how", ["module", "factor", "size"])
def test_torch_upsampling_matches_torch_and_round_trips(tmp_path, how):
    model = UNet(how)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    assert [node.attrs for node in net.graph.nodes if node.op == "upsample"] == [{"scale": (2, 2)}]
    assert_round_trip(net, _check(net, model), tmp_path / "net.npz")


@pytest.mark.parametrize("step, match", [
    (lambda x: F.interpolate(x, scale_factor=2, mode="linear"), "only mode 'nearest'"),
    (lambda x: F.interpolate(x, scale_factor=1.5), "only integer factors"),
    (lambda x: F.interpolate(x, size=7), "only integer factors")])
def test_torch_refuses_what_is_not_a_nearest_copy(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(AfterConv(step, 2), input_shape=(2, 5))


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_onnx_export_of_the_decoder_matches_torch(tmp_path, opset):
    pytest.importorskip("onnx")
    model, path = UNet("module").double().eval(), str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + SHAPE, dtype=torch.float64),), path, dynamo=False,
                          opset_version=opset, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    net = sl.Network.from_onnx(path)
    assert [node.attrs for node in net.graph.nodes if node.op == "upsample"] == [{"scale": (2, 2)}]
    _check(net, model)


def _onnx_resize(scales, mode="nearest", coordinates="asymmetric"):
    """Input (N, 2, 3, 4) -> Resize (opset 13) by ``scales``."""
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coordinates,
                            nearest_mode="floor")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", None, None, None])],
                              [numpy_helper.from_array(np.array(scales, dtype=np.float32), "scales")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_resize_matches_its_definition(tmp_path):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_resize([1, 1, 3, 2]), path)
    net = sl.Network.from_onnx(path)
    X = np.random.default_rng(2).normal(size=(3, 2, 3, 4))
    np.testing.assert_allclose(net.forward(X), X.repeat(3, axis=2).repeat(2, axis=3).reshape(3, -1), rtol=1e-12,
                               atol=1e-12)
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("options", [{"scales": [1, 1, 1.5, 2]}, {"scales": [1, 2, 2, 2]},
                                     {"scales": [1, 1, 2, 2], "mode": "linear"},
                                     {"scales": [1, 1, 2, 2], "coordinates": "align_corners"}])
def test_onnx_refuses_what_is_not_a_nearest_copy(tmp_path, options):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_resize(**options), path)
    with pytest.raises(sl.UnsupportedModelError, match="only nearest upsampling"):
        sl.Network.from_onnx(path)


class SumHead(nn.Module):
    """Convolve, sum the positions (``Tensor.sum`` or ``torch.sum``), classify."""

    def __init__(self, method):
        super().__init__()
        torch.manual_seed(0)
        self.method, self.conv, self.head = method, nn.Conv2d(2, 3, 3), nn.Linear(3, 2)

    def forward(self, x):
        y = self.conv(x)
        return self.head(y.sum(dim=(2, -1)) if self.method else torch.sum(y, (2, 3), keepdim=True).flatten(1))


@pytest.mark.parametrize("method", [True, False])
def test_torch_and_onnx_sums_match_torch(tmp_path, method):
    onnx = pytest.importorskip("onnx")
    model = SumHead(method)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    assert [node.attrs for node in net.graph.nodes if node.op == "sum"] == [{"axes": (1, 2), "keepdim": not method}]
    assert_round_trip(net, _check(net, model), tmp_path / "net.npz")
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model.double().eval(), (torch.zeros((2,) + SHAPE, dtype=torch.float64),), path,
                          dynamo=False, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    assert "sum" in {node.op for node in sl.Network.from_onnx(path).graph.nodes}
    _check(sl.Network.from_onnx(path), model)
    assert onnx.load(path) is not None
