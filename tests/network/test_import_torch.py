"""Network.from_torch: random CNNs drawn by hypothesis and the fixed MNIST-1D CNN and small ResNet against the
model's own float64 forward pass; the Sequential MLP path unchanged; every unsupported case refused by name."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from helpers.torch_models import architectures, build, mnist1d_cnn, reference, small_resnet  # noqa: E402
import sheaflinalg as sl  # noqa: E402


def _check_forward(net, model, input_shape, n=4, seed=0):
    X = np.random.default_rng(seed).normal(size=(n,) + tuple(input_shape))
    expected = reference(model, X)
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(net.forward(X.reshape(n, -1)), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(net.forward(X[0]), expected[0], rtol=1e-12, atol=1e-12)


@settings(max_examples=25)
@given(architectures(), st.integers(0, 2**16))
def test_random_cnns_match_torch(arch, seed):
    spec, input_shape = arch
    model = build(spec, input_shape, seed)
    net = sl.Network.from_torch(model, input_shape=input_shape)
    assert net.is_graph and net.input_shape == input_shape and net.output == spec["head"]["output"]
    _check_forward(net, model, input_shape, seed=seed)


def test_mnist1d_cnn_and_small_resnet_match_torch():
    net = sl.Network.from_torch(mnist1d_cnn(), input_shape=(1, 40))
    assert [n.op for n in net.graph.nodes] == ["conv", "relu"] * 3 + ["reshape", "linear"]
    _check_forward(net, mnist1d_cnn(), (1, 40), n=20)
    resnet = small_resnet()
    net = sl.Network.from_torch(resnet, input_shape=(3, 8, 8))
    names = [n.name for n in net.graph.nodes]
    assert {"layer1.0.conv1", "layer1.1.shortcut.0", "layer1.1.shortcut.1", "fc"} <= set(names)
    assert [n.op for n in net.graph.nodes].count("add") == 2 and "layer1.0.relu_1" in names   # relu called twice
    _check_forward(net, resnet, (3, 8, 8))


def test_sequential_mlp_stays_the_mlp_network():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Dropout(0.2), nn.Linear(6, 2), nn.Softmax(dim=1)).eval()
    net = sl.Network.from_torch(model)
    assert not net.is_graph and net.dims == [4, 6, 2] and net.output == "softmax"
    np.testing.assert_array_equal(net.weights[0], model[0].weight.detach().double().numpy())
    nested = nn.Sequential(nn.Sequential(nn.Linear(3, 5), nn.ReLU()), nn.Identity(), nn.Linear(5, 1), nn.Tanh())
    assert sl.Network.from_torch(nested).dims == [3, 5, 1]


class _Functional(nn.Module):
    """Functional pooling, leaky relu, a flattening view and a concatenation on the last axis."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding="same", dilation=1)
        self.conv2 = nn.Conv1d(4, 3, 2, padding="valid")
        self.fc = nn.Linear(3 * 10 + 4 * 11, 3)

    def forward(self, x):
        x = F.leaky_relu(self.conv(x), 0.2)
        x = F.max_pool2d(x, 2, stride=1, padding=1)                  # (4, 7, 7)
        x = F.adaptive_avg_pool2d(x, (1, None)).reshape(x.shape[0], 4, 7)
        y = F.avg_pool1d(x, 3, 1, 1, count_include_pad=False)        # (4, 7)
        z = torch.cat([x, y.relu()], -1)                             # (4, 14)
        pooled = F.adaptive_avg_pool1d(z, 11)                        # (4, 11)
        w = self.conv2(pooled)                                       # (3, 10)
        return self.fc(torch.cat([w.flatten(1), pooled.flatten(1)], 1))


def test_functional_forms_match_torch():
    torch.manual_seed(1)
    model = _Functional().double().eval()
    net = sl.Network.from_torch(model, input_shape=(2, 6, 6))
    assert {"leaky_relu", "maxpool", "adaptive_avgpool", "avgpool", "concat", "reshape"} <= net.graph_ops
    _check_forward(net, model, (2, 6, 6))


class _Wrap(nn.Module):
    """A one-off model: ``forward(x) = fn(self, x)``."""

    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            setattr(self, name, module)

    def forward(self, x):
        return self.fn(self, x)


def _conv1(**kw):
    return nn.Conv1d(1, 2, 3, **kw)


REFUSED = [
    (nn.Sequential(nn.Linear(2, 3), nn.Hardshrink(), nn.Linear(3, 1)), None, r"node '1' \(Hardshrink\) is not supported"),
    (nn.Sequential(nn.Linear(2, 3), nn.Softmax(dim=0), nn.Linear(3, 1)), None, r"'1' \(Softmax\).*dim=0 is not a per"),
    (nn.Sequential(nn.Conv2d(1, 1, 1), nn.AvgPool2d(2, divisor_override=3)), (1, 4, 4), "divisor_override"),
    (_Wrap(lambda s, x: s.pool(x)[0], pool=nn.MaxPool1d(2, return_indices=True)), (1, 8), "return_indices"),
    (_Wrap(lambda s, x: F.max_pool1d(x, 2, return_indices=True)[0]), (1, 8), r"\(max_pool1d_with_indices\)"),
    (nn.Sequential(_conv1(padding=1, padding_mode="reflect")), (1, 8), r"'0' \(Conv1d\).*padding_mode='reflect'"),
    (nn.Sequential(nn.Conv1d(1, 2, 4, padding="same")), (1, 8), r"padding='same' pads unevenly"),
    (nn.Sequential(_conv1(), nn.BatchNorm1d(2)).train(), (1, 8), r"'1' \(BatchNorm1d\).*call model.eval\(\)"),
    (nn.Sequential(_conv1(), nn.BatchNorm1d(2, track_running_stats=False)).eval(), (1, 8), "running statistics"),
    (nn.Sequential(nn.Linear(2, 3), nn.Dropout(0.5)).train(), None, r"'1' \(Dropout\).*model.eval\(\)"),
    (_Wrap(lambda s, x: F.dropout(x, 0.5)), (3,), "training=True"),
    (_Wrap(lambda s, x: torch.cat([x, x], 0)), (3,), r"dim=0 concatenates along the batch axis"),
    (_Wrap(lambda s, x: x.view(-1)), (3,), "mixes the samples"),
    (_Wrap(lambda s, x: 1.0 / x), (3,), "only the division of a value by a constant"),
    (_Wrap(lambda s, x: x / s.fc(x), fc=nn.Linear(3, 3)), (3,), "combines two values computed from the input"),
    (_Wrap(lambda s, x: torch.add(x, x, alpha=2)), (3,), "alpha=2"),
    (_Wrap(lambda s, x: s.fc(x) @ s.scale, fc=nn.Linear(3, 3)), (3,), r"right operand has shape \(3,\)"),
    (_Wrap(lambda s, x: torch.matmul(s.fc.weight, s.fc(x)), fc=nn.Linear(3, 3)), (3,), r"W @ x"),
    (_Wrap(lambda s, x: x + s.fc.weight[:2], fc=nn.Linear(3, 3)), (3,), "the same way for every sample"),
    (_Wrap(lambda s, x: (s.fc(x), x), fc=nn.Linear(3, 3)), (3,), "several outputs"),
    (_Wrap(lambda s, x: s.fc(x) if x.sum() > 0 else x, fc=nn.Linear(3, 3)), (3,), "torch.fx cannot trace"),
    (_Wrap(lambda s, x: s.att(x, x, x)[0], att=nn.MultiheadAttention(4, 2)), (2, 4), r"\(MultiheadAttention\)"),
    (_Wrap(lambda s, x: F.softmax(s.fc(x)) + x, fc=nn.Linear(3, 3)), (3,), r"'softmax'.*without dim"),
    (_Wrap(lambda s, x: (lambda y: F.relu(y, inplace=True) + y)(s.conv(x)), conv=_conv1()), (1, 8),
     r"modifies its input 'conv' in place, which 'add' reads"),
    (_Wrap(lambda s, x: (lambda y: y.view(-1, 6).relu_() + y)(s.conv(x)), conv=_conv1()), (1, 8),
     r"modifies its input 'conv' in place, which 'add' reads"),
    (nn.Sequential(_conv1(), nn.Softmax(dim=1)), (1, 8), "flatten first"),
]


@pytest.mark.parametrize("model, input_shape, match", REFUSED, ids=[m for _, _, m in REFUSED])
def test_unsupported_models_are_refused_naming_the_node(model, input_shape, match):
    if isinstance(model, _Wrap) and model.fn.__code__.co_names.count("scale"):
        model.scale = nn.Parameter(torch.ones(3))
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_torch(model, input_shape=input_shape, method="fx")


def test_bad_input_shapes_are_refused():
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(2 * 6 * 6, 1))
    with pytest.raises(ValueError, match=r"input_shape is required: the model's first layer '0' \(Conv2d\)"):
        sl.Network.from_torch(model)
    for bad in ("abc", (3, 0, 8), (3.0, 8, 8), ()):
        with pytest.raises(ValueError, match="input_shape must be a tuple of positive ints"):
            sl.Network.from_torch(model, input_shape=bad)
    with pytest.raises(ValueError, match=r"does not run on inputs of shape \(n, \*\(3, 9, 9\)\)"):
        sl.Network.from_torch(model, input_shape=(3, 9, 9))
    with pytest.raises(sl.UnsupportedModelError, match="takes 2 inputs"):
        sl.Network.from_torch(_Two())
    net = sl.Network.from_torch(model, input_shape=(3, 8, 8))
    with pytest.raises(ValueError,
                       match=r"\(n_samples, 192\) or \(n_samples, \*\(3, 8, 8\)\); got shape \(2, 3, 8, 9\)"):
        net.forward(np.zeros((2, 3, 8, 9)))


class _Two(nn.Module):
    def forward(self, x, y):
        return x + y


def test_model_is_left_unchanged_and_other_devices_dtypes_read():
    model = nn.Sequential(nn.Conv1d(1, 2, 3), nn.BatchNorm1d(2), nn.Flatten(), nn.Linear(12, 2)).float().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    net = sl.Network.from_torch(model, input_shape=(1, 8))
    assert all(torch.equal(before[k], v) and v.dtype == before[k].dtype for k, v in model.state_dict().items())
    assert not model.training
    _check_forward(net, model.double(), (1, 8))
    with pytest.raises(ValueError, match=r"layer 0 \(Conv1d\) weight is on the meta device"):
        sl.Network.from_torch(nn.Sequential(nn.Conv1d(1, 2, 3)).to("meta"), input_shape=(1, 8))


def test_arguments_by_keyword_or_of_another_kind_are_refused():
    cases = [(_Wrap(lambda s, x: s.fc(input=x), fc=nn.Linear(3, 3)), "a module must be called on one tensor"),
             (_Wrap(lambda s, x: torch.relu(input=x)), r"'relu' \(relu\).*arguments"),
             (_Wrap(lambda s, x: F.max_pool1d(x, x.size(2))), r"kernel_size=size is not 1 integer")]
    for model, match in cases:
        with pytest.raises(sl.UnsupportedModelError, match=match):
            sl.Network.from_torch(model, input_shape=(1, 3), method="fx")


def test_parameters_that_hold_no_network_are_refused_before_running():
    bn = nn.Sequential(nn.Conv1d(1, 2, 3), nn.BatchNorm1d(2)).eval()
    with torch.no_grad():
        bn[1].running_var.fill_(-1.0)
    with pytest.raises(sl.UnsupportedModelError, match=r"'1' \(BatchNorm1d\).*running_var \+ eps must be positive"):
        sl.Network.from_torch(bn, input_shape=(1, 8))
    fc = nn.Sequential(nn.Linear(3, 2))
    with torch.no_grad():
        fc[0].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="parameter 'weight' holds NaN or Inf"):
        sl.Network.from_torch(fc)
    with pytest.raises(sl.InsufficientMemoryError, match="shape pass"):
        sl.Network.from_torch(nn.Sequential(nn.Conv1d(1, 1, 1)), input_shape=(1, 2**50))


def test_in_place_operations_through_views_and_identities():
    def through_flatten(s, x):
        y = s.conv(x)
        s.act(s.flat(s.ident(y)))
        return y
    model = _Wrap(through_flatten, conv=_conv1(), flat=nn.Flatten(), ident=nn.Identity(), act=nn.ReLU(inplace=True))
    with pytest.raises(sl.UnsupportedModelError, match=r"'act' \(ReLU\) .*modifies its input 'conv' in place"):
        sl.Network.from_torch(model, input_shape=(1, 8))
    safe = nn.Sequential(_conv1(), nn.ReLU(inplace=True), nn.Flatten(), nn.ReLU(inplace=True), nn.Linear(12, 2))
    _check_forward(sl.Network.from_torch(safe.double(), input_shape=(1, 8)), safe, (1, 8))
