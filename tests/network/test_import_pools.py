"""Pools with ``ceil_mode=True`` (SqueezeNet, GoogLeNet) imported from PyTorch and ONNX: a SqueezeNet-like
Fire block model against torch's float64 forward pass (module and function forms), its ONNX export, windows
that run past the end with ties and exact zeros (the first maximum, as torch's own indices), the average's
divisor, graph files with and without the attribute, refusals."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import AfterConv, assert_round_trip, check_against_torch, export_onnx, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402
from sheaflinalg.network.graph.forward import evaluate  # noqa: E402
from sheaflinalg.training.checkpoint import network_identity  # noqa: E402

SHAPE = (3, 14, 12)


class Fire(nn.Module):
    """SqueezeNet's Fire module: squeeze (1x1), then expand by 1x1 and 3x3 convolutions, concatenated."""

    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1, self.expand3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1(x)), torch.relu(self.expand3(x))], 1)


class SqueezeNetLike(nn.Module):
    """Conv, ceil-mode max-pool, Fire, ceil-mode max-pool (``functional``: F.max_pool2d), Fire, a ceil-mode
    average pool counting its padding, classifier."""

    def __init__(self, functional=False):
        super().__init__()
        torch.manual_seed(0)
        self.functional = functional
        self.conv, self.pool = nn.Conv2d(3, 4, 3), nn.MaxPool2d(3, 2, ceil_mode=True)
        self.fire1, self.fire2 = Fire(4, 2, 3), Fire(6, 2, 2)
        self.avg = nn.AvgPool2d(2, 2, padding=1, ceil_mode=True, count_include_pad=True)
        self.head = nn.Linear(4 * 2 * 2, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))                        # (4, 12, 10) -> (4, 6, 5): past the end
        x = self.fire1(x)
        x = F.max_pool2d(x, 3, 2, ceil_mode=True) if self.functional else self.pool(x)     # -> (6, 3, 2)
        return self.head(self.avg(self.fire2(x)).flatten(1))                              # -> (4, 2, 2)


@pytest.mark.parametrize("functional", [False, True])
def test_a_squeezenet_fire_model_matches_torch_and_round_trips(tmp_path, functional):
    model = SqueezeNetLike(functional)
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    pools = [node for node in net.graph.nodes if node.op in ("maxpool", "avgpool")]
    assert [(n.op, n.attrs["ceil_mode"]) for n in pools] == [("maxpool", True)] * 2 + [("avgpool", True)]
    assert [net.graph.shapes[n.name] for n in pools] == [(4, 6, 5), (6, 3, 2), (4, 2, 2)]
    assert_round_trip(net, check_against_torch(net, model, SHAPE), tmp_path / "net.npz")


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_the_onnx_export_of_the_squeezenet_model_matches_torch(tmp_path, opset):
    pytest.importorskip("onnx")
    model = SqueezeNetLike()
    net = sl.Network.from_onnx(export_onnx(model, SHAPE, tmp_path / "m.onnx", opset))
    assert [n.attrs["ceil_mode"] for n in net.graph.nodes if n.op in ("maxpool", "avgpool")] == [True] * 3
    check_against_torch(net, model, SHAPE)


def test_the_onnx_export_of_a_ceil_mode_pool_of_stride_one_matches_torch(tmp_path):
    """GoogLeNet's pool branch: a 3x3 max pool of stride 1 and padding 1 in ceil mode keeps the size (ceil and
    floor agree); the import's check runs it without ceil_mode (the reference evaluator sizes it 2 larger)."""
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.MaxPool2d(3, 1, padding=1, ceil_mode=True),
                          nn.AvgPool2d(2, 1, ceil_mode=True), nn.Flatten()).double().eval()
    net = sl.Network.from_onnx(export_onnx(model, (2, 4, 5), tmp_path / "m.onnx", 17))
    assert [net.graph.shapes[n.name] for n in net.graph.nodes if n.op.endswith("pool")] == [(3, 4, 5), (3, 3, 4)]
    check_against_torch(net, model, (2, 4, 5))


class _Pooled(nn.Module):
    """``step(conv(x))`` with a 1x1 convolution whose weight is the identity: the pool reads ``x`` itself."""

    def __init__(self, step, n_axes, channels=2):
        super().__init__()
        self.step, self.conv = step, (nn.Conv1d if n_axes == 1 else nn.Conv2d)(channels, channels, 1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.eye(channels).reshape(self.conv.weight.shape))
            self.conv.bias.zero_()

    def forward(self, x):
        return self.step(self.conv(x))


def _geometries(op):
    """Every window of kernel <= 3, stride <= 3, padding <= kernel / 2, dilation <= 2 (max-pool), ceil mode."""
    for k in (1, 2, 3):
        for s in (1, 2, 3):
            for p in range(k // 2 + 1):
                for d in ((1, 2) if op == "max" else (None,)):
                    yield {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": True,
                           **({"dilation": d} if d else {})}


def _grid(n_axes):
    """Values on a grid of -1, 0, 1 (every window ties), the first sample all zeros; (4, 2, 7[, 6])."""
    X = np.random.default_rng(0).integers(-1, 2, size=(4, 2, 7) + (() if n_axes == 1 else (6,)))
    X[0] = 0
    return X.astype(np.float64)


@pytest.mark.parametrize("n_axes", [1, 2])
def test_ceil_mode_max_pools_select_torch_first_maximum_among_ties(n_axes):
    """Every window geometry on tied values and exact zeros: the values, and the selection is torch's own
    index (the first maximum), windows past the end included."""
    X, pool = _grid(n_axes), {1: F.max_pool1d, 2: F.max_pool2d}[n_axes]
    per_channel = int(np.prod(X.shape[2:]))
    for kw in _geometries("max"):
        values, index = pool(torch.from_numpy(X), return_indices=True, **kw)
        model = _Pooled(lambda x: pool(x, **kw), n_axes).double()
        net = sl.Network.from_torch(model, input_shape=X.shape[1:])
        (node,) = [n for n in net.graph.nodes if n.op == "maxpool"]
        state = evaluate(net.graph, X.reshape(4, -1))
        offset = np.arange(2)[None, :, None] * per_channel                 # channel c starts at c * positions
        np.testing.assert_array_equal(state.pattern[node.name], (index.numpy().reshape(4, 2, -1) + offset)
                                      .reshape(4, -1), err_msg=str(kw))
        np.testing.assert_array_equal(state.values[node.name], values.numpy().reshape(4, -1), err_msg=str(kw))
        assert sl.verify(net, X).passed


@pytest.mark.parametrize("n_axes", [1, 2])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_ceil_mode_average_pools_divide_as_torch_does(n_axes, count_include_pad):
    """Every window geometry: a window past the end divides by its part inside the padded input (counting
    the padding) or by its inside entries."""
    X = np.random.default_rng(1).normal(size=(3, 2, 7) + (() if n_axes == 1 else (6,)))
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d}[n_axes]
    for kw in _geometries("avg"):
        kw["count_include_pad"] = count_include_pad
        model = _Pooled(lambda x: pool(x, **kw), n_axes).double()
        net = sl.Network.from_torch(model, input_shape=X.shape[1:])
        assert [n.attrs["ceil_mode"] for n in net.graph.nodes if n.op == "avgpool"] == [True]
        np.testing.assert_allclose(net.forward(X), reference(model, X), rtol=1e-14, atol=1e-15, err_msg=str(kw))


def test_graph_files_without_ceil_mode_still_load_and_false_is_not_written(tmp_path):
    """A pool at the default ``ceil_mode=False`` is written as before the attribute (older files load); a
    ceil-mode pool writes it and keeps it."""
    net = sl.Network.from_torch(nn.Sequential(nn.Conv1d(1, 2, 1), nn.MaxPool1d(2), nn.AvgPool1d(2, ceil_mode=True)),
                                input_shape=(1, 9))
    path = str(tmp_path / "net.npz")
    net.save(path)
    with np.load(path) as f:
        nodes = json.loads(str(f["graph"]))["nodes"]
    assert [("ceil_mode" in n["attrs"], n["attrs"].get("ceil_mode")) for n in nodes] == \
        [(False, None), (False, None), (True, True)]
    back = sl.Network.load(path)
    assert [n.attrs.get("ceil_mode") for n in back.graph.nodes] == [None, False, True]
    fingerprinted = [attrs for _, _, _, attrs in network_identity(net)["graph"]]       # checkpoints read as before
    assert ["ceil_mode" in attrs for attrs in fingerprinted] == [False, False, True]
    X = np.random.default_rng(2).normal(size=(3, 1, 9))
    assert back.forward(X).tobytes() == net.forward(X).tobytes()


@pytest.mark.parametrize("step, match", [
    (lambda x: F.avg_pool1d(x, 2, ceil_mode=True, divisor_override=3), "divisor_override"),
    (lambda x: F.max_pool1d(x, 2, ceil_mode=True, return_indices=True)[0], "return_indices|with_indices")])
def test_torch_refusals_of_ceil_mode_pools(step, match):
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(AfterConv(step, 2), input_shape=(2, 5), method="fx")
