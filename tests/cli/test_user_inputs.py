"""``--network model.onnx|net.npz``, ``--inputs`` and ``--labels`` of verify, spectrum and discord
(sheaflinalg.commands.user_inputs): each command's result equals the API call on the same network and
inputs, and every bad file is refused before any work with one line naming it."""

import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.cli import main
from sheaflinalg.commands.user_inputs import label_targets, load_inputs, load_network

SHAPE = (1, 5, 5)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny ONNX CNN (3 classes), a saved chain (2 outputs), their inputs and labels."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    d = tmp_path_factory.mktemp("user")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(2 * 3 * 3, 3)).double().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model, (torch.zeros((2,) + SHAPE, dtype=torch.float64),), str(d / "m.onnx"),
                          dynamo=False, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    sl.Network.random([4, 3, 2], seed=1).save(str(d / "net.npz"))
    rng = np.random.default_rng(0)
    np.save(d / "images.npy", rng.integers(0, 256, size=(4,) + SHAPE).astype(np.uint8))
    np.save(d / "labels.npy", np.array([0, 2, 1, 2]))
    np.savez(d / "chain.npz", X=rng.normal(size=(3, 4)), y=np.array([1, 0, 1]))
    return d, model


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_onnx_network_and_image_inputs_match_the_api(files, capsys):
    d, model = files
    net = sl.Network.from_onnx(str(d / "m.onnx"))
    X = np.load(d / "images.npy").astype(np.float64)
    y = np.load(d / "labels.npy")
    assert load_network(d / "m.onnx").input_shape == SHAPE
    Xf, yf = load_inputs(str(d / "images.npy"), str(d / "labels.npy"), net)
    np.testing.assert_array_equal(Xf, X.reshape(4, -1))
    np.testing.assert_array_equal(yf, y)
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(net.forward(Xf), model(torch.from_numpy(X)).detach().numpy(), rtol=1e-12)

    status, out, _ = _run(capsys, "verify", "--network", d / "m.onnx", "--inputs", d / "images.npy")
    assert status == 0 and out.strip() == str(sl.verify(net, X)).strip()
    status, out, _ = _run(capsys, "spectrum", "--network", d / "m.onnx", "--inputs", d / "images.npy",
                          "--samples", "3", "--no-progress")
    assert status == 0 and ", 3 inputs," in out
    assert sl.spectrum(net, X[:3], progress=False).table() in out
    status, out, _ = _run(capsys, "discord", "--network", d / "m.onnx", "--inputs", d / "images.npy",
                          "--labels", d / "labels.npy", "--no-progress")
    pd = sl.discord.pinned(net, X, np.eye(3)[y])
    assert status == (0 if pd.settled.all() else 1) and pd.table() in out and "4 inputs" in out


def test_saved_network_with_npz_inputs_and_labels_matches_the_api(files, capsys):
    d, _ = files
    net = sl.Network.load(str(d / "net.npz"))
    with np.load(d / "chain.npz") as f:
        X, y = f["X"], f["y"]
    status, out, _ = _run(capsys, "verify", "--network", d / "net.npz", "--inputs", d / "chain.npz")
    assert status == 0 and out.strip() == str(sl.verify(net, X)).strip()
    status, out, _ = _run(capsys, "spectrum", "--network", d / "net.npz", "--inputs", f"{d / 'chain.npz'}:X",
                          "--no-progress")
    assert status == 0 and sl.spectrum(net, X, progress=False).table() in out
    status, out, _ = _run(capsys, "discord", "--network", d / "net.npz", "--inputs", d / "chain.npz",
                          "--labels", f"{d / 'chain.npz'}:y", "--no-progress")
    assert status in (0, 1) and sl.discord.pinned(net, X, label_targets(net, y)).table() in out


def test_flat_and_image_shaped_inputs_are_the_same(files, tmp_path):
    d, _ = files
    net = load_network(str(d / "m.onnx"))
    X = np.load(d / "images.npy")
    np.save(tmp_path / "flat.npy", X.reshape(4, -1).astype(np.float32))
    np.savez(tmp_path / "one.npz", pixels=X)
    a, _ = load_inputs(str(tmp_path / "flat.npy"), network=net)
    b, _ = load_inputs(str(tmp_path / "one.npz"), network=net)      # the only array, whatever its name
    assert a.dtype == b.dtype == np.float64 and a.shape == (4, 25)
    np.testing.assert_array_equal(a, b)


def test_label_targets_one_hot_or_the_label_itself():
    np.testing.assert_array_equal(label_targets(sl.Network.random([2, 3, 3]), np.array([2, 0])),
                                  [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(label_targets(sl.Network.random([2, 3, 1]), np.array([1, 0])), [[1], [0]])


def _write_bad(d, kind):
    """A bad file of ``kind`` in ``d``; returns (option, value) for a chain of 4 inputs and 2 outputs."""
    p = str(d / kind)
    if kind == "truncated.npz":
        np.savez(p, X=np.zeros((3, 4)))
        with open(p, "r+b") as f:
            f.truncate(os.path.getsize(p) - 40)
    elif kind == "objects.npy":
        np.save(p, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    elif kind == "crafted.npy":
        np.save(p, np.zeros((3, 4)))
        with open(p, "r+b") as f:                  # the header claims far more rows than the file holds
            head = f.read(128).replace(b"(3, 4)", b"(9, 4)")
            f.seek(0)
            f.write(head)
    elif kind == "not_numpy.npy":
        with open(p, "w") as f:
            f.write("1,2,3,4\n")
    else:
        values = {"nan.npy": np.full((3, 4), np.nan), "inf.npy": np.full((3, 4), np.inf),
                  "text.npy": np.array([["a"] * 4] * 3), "complex.npy": np.zeros((3, 4), complex),
                  "shape.npy": np.zeros((3, 5)), "empty.npy": np.zeros((0, 4)),
                  "labels_float.npy": np.array([0.0, 1.0, 1.0]), "labels_long.npy": np.array([0, 1, 1, 0]),
                  "labels_class.npy": np.array([0, 1, 2]), "labels_negative.npy": np.array([0, -1, 1]),
                  "many.npz": None}[kind]
        if kind == "many.npz":
            np.savez(p, a=np.zeros((3, 4)), b=np.zeros((3, 4)))
        else:
            np.save(p, values)
    return ("--labels" if kind.startswith("labels") else "--inputs"), p


BAD = {"truncated.npz": "truncated", "objects.npy": "pickle", "crafted.npy": "header declares",
       "not_numpy.npy": "corrupt", "nan.npy": "NaN", "inf.npy": "infinite", "text.npy": "numbers",
       "complex.npy": "numbers", "shape.npy": "expected shape (M, 4)", "empty.npy": "at least one",
       "many.npz": "no array 'X'", "labels_float.npy": "integers", "labels_long.npy": "one label per input",
       "labels_class.npy": "[0, 2)", "labels_negative.npy": "[0, 2)"}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_inputs_and_labels_are_refused_naming_the_file(files, tmp_path, capsys, kind):
    d, _ = files
    option, path = _write_bad(tmp_path, kind)
    good = {"--inputs": str(d / "chain.npz"), "--labels": f"{d / 'chain.npz'}:y", option: path}
    status, out, err = _run(capsys, "discord", "--network", d / "net.npz", "--inputs", good["--inputs"],
                            "--labels", good["--labels"], "--no-progress")
    assert status == 2 and out == "" and path in err and BAD[kind] in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["verify", "--network", "{d}/missing.onnx"], "missing.onnx: no such file"),
    (["verify", "--network", "{d}/net.h5"], "expected a .onnx or .npz file"),
    (["verify", "--network", "{d}/net.npz", "--inputs", "{d}/X.csv"], "X.csv: expected a .npy or .npz file"),
    (["spectrum", "--network", "{d}/net.npz", "--inputs", "{d}/missing.npy"], "missing.npy: no such file"),
    (["spectrum", "--network", "{d}/images.npy"], "expected a .onnx or .npz file"),
    (["discord", "--network", "{d}/net.npz", "--labels", "{d}/labels.npy"], "--labels needs --inputs"),
    (["verify", "--network", "{d}/net.npz", "--labels", "{d}/labels.npy"], "unrecognized arguments: --labels"),
    (["discord", "--inputs", "{d}/images.npy", "--labels", "{d}/labels.npy"], "--inputs has no effect without"),
    (["discord", "--network", "{d}/net.npz", "--inputs", "{d}/chain.npz"], "--inputs needs --labels"),
    (["discord", "--network", "{d}/net.npz", "--inputs", "{d}/chain.npz", "--labels", "{d}/chain.npz:y",
      "--task", "saddle"], "--task has no effect"),
])
def test_bad_command_lines_are_refused(files, capsys, argv, words):
    d, _ = files
    status, out, err = _run(capsys, *[a.format(d=d) for a in argv])
    assert status == 2 and words in err, err


def test_a_missing_inputs_file_is_refused_before_the_network_is_read(files, tmp_path, capsys):
    d, _ = files
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    status, _, err = _run(capsys, "verify", "--network", tmp_path / "broken.onnx", "--inputs", tmp_path / "X.npy")
    assert status == 2 and "X.npy: no such file" in err
    status, _, err = _run(capsys, "verify", "--network", tmp_path / "broken.onnx", "--inputs", d / "images.npy")
    assert status == 2 and "broken.onnx" in err
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(FileNotFoundError, match="y.npy: no such file"):
        load_inputs(str(tmp_path / "corrupt.npy"), str(tmp_path / "y.npy"))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(suffix=st.sampled_from([".npy", ".npz"]), cut=st.booleans(), where=st.floats(0, 1),
       byte=st.integers(0, 255))
def test_damaged_inputs_files_are_refused_naming_the_file_or_read_checked(tmp_path_factory, suffix, cut, where,
                                                                          byte):
    """A truncated or byte-flipped inputs file: one ValueError naming it, or checked (4, 3) finite inputs."""
    path = tmp_path_factory.mktemp("fuzz") / f"X{suffix}"
    X = np.arange(12.0).reshape(4, 3)
    (np.save if suffix == ".npy" else np.savez)(path, X)
    data = bytearray(path.read_bytes())
    k = int(where * (len(data) - 1))
    data = data[:k] if cut else data[:k] + bytes([byte]) + data[k + 1:]
    path.write_bytes(bytes(data))
    try:
        got, _ = load_inputs(str(path), network=sl.Network.random([3, 2, 1]))
    except ValueError as exc:
        assert str(path) in str(exc)
    else:
        assert got.shape == (4, 3) and got.dtype == np.float64 and np.all(np.isfinite(got))


@pytest.mark.parametrize("kind", ["nan.npy", "objects.npy", "labels_float.npy", "labels_long.npy"])
def test_bad_inputs_are_refused_before_the_network_is_read(files, tmp_path, capsys, monkeypatch, kind):
    d, _ = files

    def tripwire(*args, **kwargs):
        raise AssertionError("the network was read before the inputs were checked")

    monkeypatch.setattr(sl.Network, "from_onnx", tripwire)
    option, path = _write_bad(tmp_path, kind)
    good = {"--inputs": str(d / "chain.npz"), "--labels": f"{d / 'chain.npz'}:y", option: path}
    for command in (["verify"], ["spectrum", "--no-progress"], ["discord", "--no-progress"]):
        labels = ["--labels", good["--labels"]] if command[0] == "discord" or option == "--labels" else []
        if command[0] != "discord" and option == "--labels":
            continue                                             # only discord takes --labels
        status, _, err = _run(capsys, *command, "--network", d / "m.onnx", "--inputs", good["--inputs"], *labels)
        assert status == 2 and path in err and BAD[kind] in err, err
