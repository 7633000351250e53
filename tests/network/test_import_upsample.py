"""Nearest and (bi)linear upsampling and sums (issue 32) imported from PyTorch and ONNX: a U-Net-like decoder
(downsample, upsample, join the skip) and a sum over the positions against torch's float64 forward pass, the graph
file keeping them; other modes and non-integer factors refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import AfterConv, assert_round_trip, check_against_torch, export_onnx  # noqa: E402
import sheaflinalg as sl  # noqa: E402

SHAPE = (2, 4, 6)


NEAREST = {"scale": (2, 2), "mode": "nearest", "align_corners": False}


class UNet(nn.Module):
    """Convolve, pool by 2, convolve, upsample by 2 (``how``: the module, a factor or a size; ``mode`` and
    ``align_corners`` torch's), join the skip, convolve, classify."""

    def __init__(self, how, mode="nearest", align_corners=None):
        super().__init__()
        torch.manual_seed(0)
        self.how, self.mode, self.align = how, mode, align_corners
        self.up = nn.Upsample(scale_factor=2, mode=mode, align_corners=align_corners)
        self.down, self.bottom = nn.Conv2d(2, 3, 3, padding=1), nn.Conv2d(3, 3, 1)
        self.out, self.head = nn.Conv2d(6, 2, 3, padding=1), nn.Linear(2 * 4 * 6, 3)

    def forward(self, x):
        skip = torch.relu(self.down(x))
        y = self.bottom(F.max_pool2d(skip, 2))
        if self.how == "module":
            y = self.up(y)
        elif self.how == "factor":
            y = F.interpolate(y, scale_factor=2.0, mode=self.mode, align_corners=self.align)
        else:
            y = F.interpolate(y, size=(4, 6), mode=self.mode, align_corners=self.align)
        return self.head(self.out(torch.cat([skip, y], 1)).flatten(1))


def _check(net, model):
    return check_against_torch(net, model, SHAPE)


@pytest.mark.parametrize("how", ["module", "factor", "size"])
@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("bilinear", False), ("bilinear", True)])
def test_torch_upsampling_matches_torch_and_round_trips(tmp_path, how, mode, align_corners):
    model = UNet(how, mode, align_corners)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    expected = NEAREST if mode == "nearest" else {"scale": (2, 2), "mode": "linear", "align_corners": align_corners}
    assert [node.attrs for node in net.graph.nodes if node.op == "upsample"] == [expected]
    assert_round_trip(net, _check(net, model), tmp_path / "net.npz")


@pytest.mark.parametrize("align_corners", [None, False, True])
@pytest.mark.parametrize("how", ["function", "module"])
def test_torch_linear_upsampling_of_sequences_matches_torch(how, align_corners):
    """``mode='linear'`` on ``(C, L)`` maps by factors 1 to 4 (the module form: ``nn.Upsample``)."""
    for factor in (1, 2, 3, 4):
        if how == "module":
            step = nn.Upsample(scale_factor=factor, mode="linear", align_corners=align_corners)
        else:
            def step(x, factor=factor):
                return F.interpolate(x, scale_factor=factor, mode="linear", align_corners=align_corners)
        model = AfterConv(step, 2)
        net = sl.Network.from_torch(model, input_shape=(2, 5))
        check_against_torch(net, model, (2, 5))


def test_upsampling_bilinear2d_is_read_as_an_aligned_linear_upsampling():
    model = nn.Sequential(nn.Conv2d(2, 2, 1), nn.UpsamplingBilinear2d(size=(6, 9)))
    net = sl.Network.from_torch(model, input_shape=(2, 2, 3))
    assert net.graph.nodes[-1].attrs == {"scale": (3, 3), "mode": "linear", "align_corners": True}
    check_against_torch(net, model, (2, 2, 3))


@pytest.mark.parametrize("step, match", [
    (lambda x: F.interpolate(x, scale_factor=2, mode="area"), "only modes 'nearest', 'linear' and 'bilinear'"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"), "only modes"),
    (lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"), "only integer factors"),
    (lambda x: F.interpolate(x, scale_factor=1.5), "only integer factors"),
    (lambda x: F.interpolate(x, size=7), "only integer factors")])
def test_torch_refuses_what_is_not_an_integer_upsampling(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(AfterConv(step, 2), input_shape=(2, 5))


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_onnx_export_of_the_decoder_matches_torch(tmp_path, opset):
    pytest.importorskip("onnx")
    model = UNet("module")
    net = sl.Network.from_onnx(export_onnx(model, SHAPE, tmp_path / "m.onnx", opset))
    assert [node.attrs for node in net.graph.nodes if node.op == "upsample"] == [NEAREST]
    _check(net, model)


@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("align_corners", [False, True])
def test_onnx_export_of_the_bilinear_decoder_matches_torch(tmp_path, opset, align_corners):
    pytest.importorskip("onnx")
    model = UNet("factor", "bilinear", align_corners)
    net = sl.Network.from_onnx(export_onnx(model, SHAPE, tmp_path / "m.onnx", opset))
    assert [node.attrs for node in net.graph.nodes if node.op == "upsample"] == \
        [{"scale": (2, 2), "mode": "linear", "align_corners": align_corners}]
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


def test_onnx_nearest_resize_matches_its_definition(tmp_path):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_resize([1, 1, 3, 2]), path)
    net = sl.Network.from_onnx(path)
    X = np.random.default_rng(2).normal(size=(3, 2, 3, 4))
    np.testing.assert_allclose(net.forward(X), X.repeat(3, axis=2).repeat(2, axis=3).reshape(3, -1), rtol=1e-12,
                               atol=1e-12)
    assert sl.verify(net, X).passed


def _linear_factor(n, s, align_corners):
    """The ``(n * s, n)`` linear interpolation matrix of one axis, from the ONNX coordinate transformations:
    ``x = q (n - 1) / (m - 1)`` (align_corners) or ``(q + 0.5) / s - 0.5`` (half_pixel), edges clamped."""
    m = n * s
    A = np.zeros((m, n))
    for q in range(m):
        x = q * (n - 1) / (m - 1) if align_corners else (q + 0.5) / s - 0.5
        x = min(max(x, 0.0), n - 1.0)
        lo = int(np.floor(x))
        A[q, lo] += 1 - (x - lo)
        A[q, min(lo + 1, n - 1)] += x - lo
    return A


@pytest.mark.parametrize("coordinates", ["half_pixel", "pytorch_half_pixel", "align_corners"])
def test_onnx_linear_resize_matches_its_definition(tmp_path, coordinates):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_resize([1, 1, 3, 2], "linear", coordinates), path)
    net = sl.Network.from_onnx(path)
    assert net.graph.nodes[-1].attrs == {"scale": (3, 2), "mode": "linear",
                                         "align_corners": coordinates == "align_corners"}
    X = np.random.default_rng(2).normal(size=(3, 2, 3, 4))
    A, B = (_linear_factor(n, s, coordinates == "align_corners") for n, s in ((3, 3), (4, 2)))
    np.testing.assert_allclose(net.forward(X), np.einsum("pi,qj,ncij->ncpq", A, B, X).reshape(3, -1), rtol=1e-12,
                               atol=1e-12)
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("options", [{"scales": [1, 1, 1.5, 2]}, {"scales": [1, 2, 2, 2]},
                                     {"scales": [1, 1, 2, 2], "mode": "linear"},
                                     {"scales": [1, 1, 2, 2], "mode": "cubic", "coordinates": "half_pixel"},
                                     {"scales": [1, 1, 1.5, 2], "mode": "linear", "coordinates": "half_pixel"},
                                     {"scales": [1, 1, 2, 2], "coordinates": "align_corners"}])
def test_onnx_refuses_what_is_not_an_integer_upsampling(tmp_path, options):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_resize(**options), path)
    with pytest.raises(sl.UnsupportedModelError, match="only upsampling of the spatial axes by integer factors"):
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
