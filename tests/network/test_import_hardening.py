"""Importers check what they built against the model they read (one random input, node by node), read
ONNX external data only from the model's own directory, and refuse self-contradicting or obscure input
with errors that name the problem; valid models refused before (a one-tensor cat, bfloat16 weights) import."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
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


def test_a_model_value_of_another_size_is_refused_at_its_node_and_at_the_output():
    from sheaflinalg.network.graph import Graph, Node
    from sheaflinalg.network.importers.check import check_import

    graph = Graph((2,), [Node("fc", "linear", ["x"], params={"weight": np.eye(2), "bias": np.zeros(2)})])
    X = np.ones((3, 2))
    with pytest.raises(ImportMismatchError, match=r"at node 'fc' \(linear\).*another shape"):
        check_import(graph, X, {"fc": np.ones((3, 3))}, X, "m", "a hook")
    with pytest.raises(ImportMismatchError, match="at its output.*another shape"):
        check_import(graph, X, {}, np.ones((3, 1)), "m", "a hook")


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


def test_parametrized_layers_import_the_weights_they_compute_with():
    from torch.nn.utils import parametrizations

    torch.manual_seed(0)
    model = nn.Sequential(parametrizations.orthogonal(nn.Linear(5, 5)), nn.ReLU(),
                          parametrizations.weight_norm(nn.Linear(5, 2))).double().eval()
    X = np.random.default_rng(1).normal(size=(6, 5))
    np.testing.assert_allclose(sl.Network.from_torch(model).forward(X), _torch_output(model, X), rtol=1e-12,
                               atol=1e-12)


def test_a_model_that_cannot_be_copied_is_refused_clearly():
    import threading

    model = _mlp()
    model[0].lock = threading.Lock()           # a layer holding something deepcopy cannot copy
    with pytest.raises(sl.UnsupportedModelError, match=r"cannot be copied to run it once in float64 \(TypeError"):
        sl.Network.from_torch(model)


class _DenseFirst(nn.Module):
    """DenseNet's first dense layer concatenates a list of one tensor."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x):
        return self.conv(torch.cat([x], 1)) + self.conv(torch.cat((x,), -3))


def test_a_one_tensor_cat_is_the_tensor():
    torch.manual_seed(0)
    model = _DenseFirst().double().eval()
    net = sl.Network.from_torch(model, input_shape=(2, 5, 5))
    assert net.graph_ops == {"conv", "add"}
    X = np.random.default_rng(1).normal(size=(3, 2, 5, 5))
    np.testing.assert_allclose(net.forward(X), _torch_output(model, X), rtol=1e-12, atol=1e-12)


def test_a_wrong_input_shape_names_the_node_that_fails_and_why():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    with pytest.raises(ValueError, match=r"node '0' \(Conv2d\) fails: RuntimeError: .*3 channels, but got 2"):
        sl.Network.from_torch(model, input_shape=(2, 5, 5))


# ------------------------------------------------------------------ ONNX
_W = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)


def _onnx_model(nodes, initializers=(), in_shape=("N", 3), out_shape=("N", 2), elem=TensorProto.FLOAT):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, in_shape)],
                              [helper.make_tensor_value_info("y", elem, out_shape)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _external(tensor, location, offset=0, length=None):
    """Move ``tensor``'s data out of the file (to be written at ``location``); returns the bytes."""
    raw = tensor.raw_data
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", len(raw) if length is None else length)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return raw


def _matmul_model(path, location, data_at=None, constant=False, **where):
    """``y = x @ W`` with ``W`` stored at ``location`` (its bytes written at ``data_at``), an initializer or
    a Constant node's value."""
    tensor = numpy_helper.from_array(_W, "w")
    raw = _external(tensor, location, **where)
    if data_at is not None:
        data_at.write_bytes(raw)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    if constant:
        model = _onnx_model([helper.make_node("Constant", [], ["w"], value=tensor)] + nodes)
    else:
        model = _onnx_model(nodes, [tensor])
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize("constant", [False, True], ids=["initializer", "Constant node"])
def test_external_data_is_read_from_the_model_directory(tmp_path, constant):
    (tmp_path / "m").mkdir()
    path = _matmul_model(tmp_path / "m" / "m.onnx", "w.bin", tmp_path / "m" / "w.bin", constant)
    X = np.random.default_rng(1).normal(size=(4, 3))
    np.testing.assert_allclose(sl.Network.from_onnx(path).forward(X), X @ _W.astype(np.float64), rtol=1e-12)


def test_a_constant_node_external_data_is_not_read_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    (tmp_path / "cwd").mkdir()
    path = _matmul_model(tmp_path / "m" / "m.onnx", "secret.bin", tmp_path / "cwd" / "secret.bin", constant=True)
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(ValueError, match="'secret.bin', which is not a file in the model's own directory"):
        sl.Network.from_onnx(path)


def test_external_data_leaving_the_model_directory_is_refused(tmp_path):
    (tmp_path / "m").mkdir()
    outside = tmp_path / "outside.bin"
    (tmp_path / "m" / "link.bin").symlink_to(outside)
    for constant in (False, True):
        for location, match in (("../outside.bin", "leads outside the model's own directory"),
                                (str(outside), "not a path relative to the model's directory"),
                                ("link.bin", "leads outside the model's own directory")):
            path = _matmul_model(tmp_path / "m" / "m.onnx", location, outside, constant)
            with pytest.raises(ValueError, match=match):
                sl.Network.from_onnx(path)
    path = _matmul_model(tmp_path / "m" / "m.onnx", "w.bin", tmp_path / "m" / "w.bin", offset=8)
    with pytest.raises(ValueError, match=r"\(offset 8, length 24\) is not inside 'w.bin' \(24 bytes\)"):
        sl.Network.from_onnx(path)


def test_a_conv_whose_kernel_shape_contradicts_its_weight_is_refused(tmp_path):
    weight = numpy_helper.from_array(np.ones((2, 1, 3), dtype=np.float32), "w")
    model = _onnx_model([helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[2], name="conv"),
                         helper.make_node("Flatten", ["c"], ["y"])], [weight], ("N", 1, 6), ("N", 10))
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(sl.UnsupportedModelError, match=r"node 'conv' \(Conv\).*kernel_shape \[2\] contradicts its "
                                                       r"weight of shape \[2, 1, 3\]"):
        sl.Network.from_onnx(str(tmp_path / "m.onnx"))


def test_bfloat16_weights_are_read_exactly(tmp_path):
    weight = helper.make_tensor("w", TensorProto.BFLOAT16, [3, 2], _W.reshape(-1).tolist())
    model = _onnx_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [weight], elem=TensorProto.BFLOAT16)
    onnx.save(model, str(tmp_path / "m.onnx"))
    net = sl.Network.from_onnx(str(tmp_path / "m.onnx"))
    # bfloat16 keeps a float32's top 16 bits (rounded to nearest even): the exact values, widened
    bits = _W.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
    X = np.random.default_rng(1).normal(size=(4, 3))
    np.testing.assert_array_equal(net.forward(X), X @ rounded.astype(np.float64))
    assert not np.array_equal(rounded, _W)


def test_a_one_input_concat_is_its_input(tmp_path):
    nodes = [helper.make_node("Concat", ["x"], ["c"], axis=1), helper.make_node("MatMul", ["c", "w"], ["y"])]
    model = _onnx_model(nodes, [numpy_helper.from_array(_W, "w")])
    onnx.save(model, str(tmp_path / "m.onnx"))
    X = np.random.default_rng(1).normal(size=(4, 3))
    np.testing.assert_allclose(sl.Network.from_onnx(str(tmp_path / "m.onnx")).forward(X), X @ _W.astype(np.float64),
                               rtol=1e-12)


def test_an_output_that_is_an_initializer_is_refused_clearly(tmp_path):
    model = _onnx_model([helper.make_node("Relu", ["x"], ["r"])], [numpy_helper.from_array(_W, "y")],
                        out_shape=(3, 2))
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(sl.UnsupportedModelError, match="m.onnx: the model's output 'y' is not computed from its input"):
        sl.Network.from_onnx(str(tmp_path / "m.onnx"))


def test_a_bias_broadcast_over_the_batch_is_refused(tmp_path):
    """``MatMul + C`` with ``C`` of shape (2, 1): ONNX adds C[s] to sample s (a batch of 2), not a bias per feature
    nor one constant for every sample."""
    bias = numpy_helper.from_array(np.array([[1.0], [-2.0]], dtype=np.float32), "c")
    model = _onnx_model([helper.make_node("MatMul", ["x", "w"], ["z"], name="fc"),
                         helper.make_node("Add", ["z", "c"], ["y"])], [numpy_helper.from_array(_W, "w"), bias])
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(sl.UnsupportedModelError, match=r"m.onnx: node .*\(Add\).*does not broadcast over the batch"):
        sl.Network.from_onnx(str(tmp_path / "m.onnx"))
