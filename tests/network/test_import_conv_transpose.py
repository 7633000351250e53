"""Transposed convolutions (issue "every network people train") imported from PyTorch and ONNX: a U-Net-like model
(convolution encoder, max-pool, transposed-convolution decoder, ``torch.cat`` skip) against torch's float64
forward pass, in its module and functional forms and through its ONNX export; the harmonic extension, verify and
the graph file keep it; what cannot be mapped (an ``output_size`` argument, ONNX ``output_shape``, ``auto_pad``,
uneven pads) refused."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import assert_round_trip, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

SHAPES = {2: (2, 6, 8), 1: (2, 9)}
CONV = {1: nn.Conv1d, 2: nn.Conv2d}
TRANSPOSED = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d}
FUNCTION = {1: F.conv_transpose1d, 2: F.conv_transpose2d}
POOL = {1: F.max_pool1d, 2: F.max_pool2d}


class UNet(nn.Module):
    """Encode (convolution, ReLU), pool by 2, convolve, decode by a stride-2 transposed convolution (module or
    function; its kernel, padding, output padding and dilation bring the length back), join the skip, convolve,
    classify."""

    def __init__(self, n_axes, window, functional=False, groups=1):
        super().__init__()
        torch.manual_seed(0)
        shape = SHAPES[n_axes]
        self.n_axes, self.functional = n_axes, functional
        self.down, self.bottom = CONV[n_axes](2, 4, 3, padding=1), CONV[n_axes](4, 4, 3, padding=1)
        kernel, padding, extra, dilation = window
        self.up = TRANSPOSED[n_axes](4, 4, kernel, stride=2, padding=padding, output_padding=extra, groups=groups,
                                     dilation=dilation)
        self.out = CONV[n_axes](8, 2, 3, padding=1)
        self.head = nn.Linear(2 * int(np.prod(shape[1:])), 3)

    def forward(self, x):
        skip = torch.relu(self.down(x))
        y = torch.relu(self.bottom(POOL[self.n_axes](skip, 2)))
        if self.functional:
            up = self.up
            y = FUNCTION[self.n_axes](y, up.weight, up.bias, up.stride, up.padding, up.output_padding, up.groups,
                                      up.dilation)
        else:
            y = self.up(y)
        return self.head(self.out(torch.cat([skip, y], 1)).flatten(1))


def _check(net, model, n_axes):
    """The net equals the model's float64 forward pass, so does its harmonic extension, and verify passes."""
    X = np.random.default_rng(1).normal(size=(5,) + SHAPES[n_axes])
    expected = reference(model.double().eval(), X)
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sl.harmonic_extension(net, X).output, expected, rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


#: ``(kernel, padding, output_padding, dilation)`` of decoders bringing the pooled lengths back (an output padding
#: of 2 >= the stride: allowed below the dilation 3).
CLASSIC, WIDE, ODD, DILATED, WIDER = (2, 0, 0, 1), (4, 1, 0, 1), (2, 0, 1, 1), (2, 1, 1, 2), (3, 3, 2, 3)


@pytest.mark.parametrize("n_axes, window, functional, groups", [
    (2, CLASSIC, False, 1), (2, WIDE, True, 1), (1, ODD, False, 2), (1, WIDER, True, 1), (2, DILATED, False, 4)])
def test_torch_unet_matches_torch_and_round_trips(tmp_path, n_axes, window, functional, groups):
    model = UNet(n_axes, window, functional, groups)
    net = sl.Network.from_torch(model, input_shape=SHAPES[n_axes])
    (node,) = [node for node in net.graph.nodes if node.op == "conv_transpose"]
    assert node.attrs == {"stride": (2,) * n_axes, "padding": (window[1],) * n_axes,
                          "output_padding": (window[2],) * n_axes, "dilation": (window[3],) * n_axes, "groups": groups}
    assert_round_trip(net, _check(net, model, n_axes), tmp_path / "net.npz")


def test_a_transposed_convolution_without_bias_matches_torch():
    model = nn.Sequential(nn.ConvTranspose2d(2, 3, (2, 3), stride=(3, 1), padding=(0, 1), bias=False))
    net = sl.Network.from_torch(model, input_shape=(2, 3, 4))
    X = np.random.default_rng(2).normal(size=(4, 2, 3, 4))
    np.testing.assert_allclose(net.forward(X), reference(model.double(), X), rtol=1e-12, atol=1e-12)


class OutputSize(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose1d(2, 2, 3, stride=2, padding=1)

    def forward(self, x):
        return self.up(x, output_size=[2 * x.size(2)])


class ComputedWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2, 2, 3))

    def forward(self, x):
        return F.conv_transpose1d(x, 2 * self.weight)


class InputWeight(nn.Module):
    def forward(self, x):
        return F.conv_transpose1d(x, x)


@pytest.mark.parametrize("model, match", [
    (OutputSize(), "output_size, are not supported"),
    (ComputedWeight(), "its weight is mul, not a parameter or buffer of the model"),
    (InputWeight(), "its weight is x, not a parameter or buffer")])
def test_torch_refuses_what_it_cannot_map(model, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(model, input_shape=(2, 5), method="fx")


class Plain(nn.Module):
    """``F.conv_transpose1d`` reading the model's own parameter (no module)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 3, 2))

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, stride=2)


def test_a_functional_weight_is_read_from_the_model():
    plain = Plain()
    net = sl.Network.from_torch(plain, input_shape=(2, 5))
    (node,) = net.graph.nodes
    np.testing.assert_array_equal(node.params["weight"], plain.weight.detach().double().numpy())
    assert net.graph.shapes[node.name] == (3, 10) and not node.params["bias"].any()
    X = np.random.default_rng(4).normal(size=(3, 2, 5))
    np.testing.assert_allclose(net.forward(X), reference(plain.double(), X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_axes, window", [(1, ODD), (2, DILATED)])
def test_onnx_export_of_the_unet_matches_torch(tmp_path, n_axes, window):
    pytest.importorskip("onnx")
    # groups 1: onnx's reference evaluator, which the import is checked against, mixes up grouped ConvTranspose
    model, path = UNet(n_axes, window).double().eval(), str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + SHAPES[n_axes], dtype=torch.float64),), path, dynamo=False,
                          input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    net = sl.Network.from_onnx(path)
    (node,) = [node for node in net.graph.nodes if node.op == "conv_transpose"]
    assert node.attrs["output_padding"] == (window[2],) * n_axes and node.attrs["dilation"] == (window[3],) * n_axes
    _check(net, model, n_axes)


def _onnx_transposed(**attrs):
    """Input (N, 2, 3) -> ConvTranspose (opset 13) by a weight (2, 2, 3) with ``attrs``."""
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    weight = numpy_helper.from_array(np.arange(12.0).reshape(2, 2, 3), "w")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", 2, None])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_conv_transpose_matches_torch(tmp_path):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_transposed(strides=[2], pads=[1, 1], output_padding=[1]), path)
    net = sl.Network.from_onnx(path)
    X = np.random.default_rng(3).normal(size=(3, 2, 3))
    expected = F.conv_transpose1d(torch.from_numpy(X), torch.arange(12.0, dtype=torch.float64).reshape(2, 2, 3),
                                  stride=2, padding=1, output_padding=1).numpy()
    np.testing.assert_allclose(net.forward(X), expected.reshape(3, -1), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed


@pytest.mark.parametrize("attrs, match", [({"output_shape": [6]}, "output_shape is not supported"),
                                          ({"auto_pad": "SAME_UPPER", "strides": [2]}, "auto_pad='SAME_UPPER'"),
                                          ({"pads": [1, 0]}, "only symmetric padding")])
def test_onnx_refuses_what_it_cannot_map(tmp_path, attrs, match):
    onnx = pytest.importorskip("onnx")
    path = str(tmp_path / "m.onnx")
    onnx.save(_onnx_transposed(**attrs), path)
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(path)
