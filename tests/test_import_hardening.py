"""Importers check what they built against the model they read (one random input, node by node), read
ONNX external data only from the model's own directory, and refuse self-contradicting or obscure input
with errors that name the problem; valid models refused before (a one-tensor cat, bfloat16 weights) import."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import sheaflinalg as sl  # noqa: E402
from sheaflinalg.network.errors import ImportMismatchError  # noqa: E402


def _torch_output(model, X):
    with torch.no_grad():
        return model(torch.from_numpy(X)).numpy().reshape(len(X), -1)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)).double().eval()


# ------------------------------------------------------------------ torch: the check against the model
def test_a_forward_hook_changing_a_layer_is_refused_naming_the_layer():
    model = _mlp()
    model[0].register_forward_hook(lambda layer, inputs, out: out * 2)
    with pytest.raises(ImportMismatchError, match=r"differs from the model at node '0' \(linear\): max \|difference\|"):
        sl.Network.from_torch(model)


def test_a_hook_on_the_whole_model_is_refused_at_the_output():
    model = _mlp()
    model.register_forward_hook(lambda layer, inputs, out: out + 1)
    with pytest.raises(ImportMismatchError, match="at its output"):
        sl.Network.from_torch(model)


class _Aliased(nn.Module):
    """``t = a; t += f(x); cat([t, a])``: both halves are ``a + f(x)`` in torch; torch.fx records ``t + f(x)``."""

    def __init__(self):
        super().__init__()
        self.a, self.f = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        a = self.a(x)
        t = a
        t += self.f(x)
        return torch.cat([t, a], 1)


def test_in_place_aliasing_lost_by_the_trace_is_refused():
    torch.manual_seed(0)
    with pytest.raises(ImportMismatchError, match=r"at its output \(after node 'cat'"):
        sl.Network.from_torch(_Aliased().double().eval())


def test_spectral_norm_and_old_weight_norm_import_the_weights_the_model_uses():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # both are deprecated in favour of parametrizations
        models = [nn.Sequential(nn.utils.spectral_norm(nn.Linear(4, 5).double()), nn.ReLU(), nn.Linear(5, 2)),
                  nn.Sequential(nn.utils.weight_norm(nn.Linear(4, 5).double()), nn.ReLU(), nn.Linear(5, 2))]
    X = np.random.default_rng(1).normal(size=(6, 4))
    for model in models:
        model = model.double().eval()
        net = sl.Network.from_torch(model)
        np.testing.assert_allclose(net.forward(X), _torch_output(model, X), rtol=1e-12, atol=1e-12)


class _DenseFirst(nn.Module):
    """DenseNet's first dense layer concatenates a list of one tensor."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x):
        return self.conv(torch.cat([x], 1))


def test_a_one_tensor_cat_is_the_tensor():
    torch.manual_seed(0)
    model = _DenseFirst().double().eval()
    net = sl.Network.from_torch(model, input_shape=(2, 5, 5))
    assert net.graph_ops == {"conv"}
    X = np.random.default_rng(1).normal(size=(3, 2, 5, 5))
    np.testing.assert_allclose(net.forward(X), _torch_output(model, X), rtol=1e-12, atol=1e-12)


def test_a_wrong_input_shape_names_the_node_that_fails_and_why():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    with pytest.raises(ValueError, match=r"node '0' \(Conv2d\) fails: RuntimeError: .*3 channels, but got 2"):
        sl.Network.from_torch(model, input_shape=(2, 5, 5))
