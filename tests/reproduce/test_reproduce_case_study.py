"""The MNIST-1D case study: its data, its trained network kept for reruns, and the computed properties of
the quick reproduction's outputs (run once for the suite by the installed wheel, conftest.py)."""

import csv
import json
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.reproduce import backprop, case_mnist1d, mnist1d_cnn
from sheaflinalg.reproduce.case_analysis import relabelled


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def case(quick_reproduction):
    """The quick reproduction's output folder, its per-input rows and its summary ``{quantity: value}``."""
    inputs = _rows(quick_reproduction / "tables" / "case_mnist1d_inputs.csv")
    summary = {r["quantity"]: r["value"] for r in _rows(quick_reproduction / "tables" / "case_mnist1d_summary.csv")}
    return quick_reproduction, inputs, summary


def test_the_trained_cnn_beats_chance_and_is_certified(case):
    out, inputs, summary = case
    assert float(summary["test accuracy (imported network, all test inputs)"]) > 0.2       # chance: 0.1
    passed, verified = summary["certified inputs (det = 1 and harmonic = forward)"].split("/")
    assert passed == verified and int(verified) == case_mnist1d.SETTINGS[True].n_verify
    # the kept network is the one analysed: its own predictions of the analysed test inputs
    net = sl.Network.load(out / "networks" / "mnist1d_cnn_quick.npz")
    assert net.is_graph and net.output == "identity" and [n.name for n in net.graph.nodes] == list(mnist1d_cnn.LAYERS)
    data = sl.tasks.mnist1d(seed=case_mnist1d.DATA_SEED, n_samples=case_mnist1d.SETTINGS[True].n_samples)
    index = [int(r["test_index"]) for r in inputs]
    assert net.forward(data.X_test[index]).argmax(axis=1).tolist() == [int(r["predicted"]) for r in inputs]
    assert data.Y_test[index].argmax(axis=1).tolist() == [int(r["label"]) for r in inputs]
    record = json.loads((out / "networks" / "mnist1d_cnn_quick.npz.json").read_text())
    assert len(record["train_loss"]) == case_mnist1d.SETTINGS[True].protocol.epochs


def test_spectra_energies_and_discord_of_the_analysed_inputs(case):
    _, inputs, summary = case
    wrong = [r for r in inputs if r["label"] != r["predicted"]]
    assert wrong and len(wrong) < len(inputs)                  # both outcomes are analysed
    for r in inputs:
        lo, hi = float(r["lambda_min"]), float(r["lambda_max"])
        assert 0 < lo <= 1 <= hi                               # det L = 1
        energy = [float(v) for k, v in r.items() if k.startswith("energy_")]
        assert min(energy) >= 0 and sum(energy) == pytest.approx(1, abs=1e-8)
    # pinned to the true label at the network's own confidence: the first misclassified inputs, each with discord
    pinned = [r for r in inputs if r["pinned_discord"]]
    assert pinned == wrong[:case_mnist1d.SETTINGS[True].n_pinned]
    assert all(float(r["pinned_discord"]) > 0 for r in pinned)
    settled, n_pinned = summary["pinned equilibria settled (the first misclassified inputs)"].split("/")
    assert int(n_pinned) == len(pinned) and int(settled) <= len(pinned)


def test_mnist1d_data_are_generated_offline_and_leave_global_state_alone():
    np.random.seed(7)
    random.seed(7)
    before = np.random.get_state()[1].copy(), random.getstate()
    a = sl.tasks.mnist1d(seed=3, n_samples=60)
    assert np.array_equal(np.random.get_state()[1], before[0]) and random.getstate() == before[1]
    b = sl.tasks.mnist1d(seed=3, n_samples=60)
    assert a.X_train.shape == (48, 40) and a.X_test.shape == (12, 40) and a.output == "softmax"
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.Y_test, b.Y_test)
    assert np.all(a.Y_train.sum(axis=1) == 1) and set(np.unique(a.Y_train)) == {0.0, 1.0}
    assert not np.array_equal(a.X_train, sl.tasks.mnist1d(seed=4, n_samples=60).X_train)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(seed=-1), ValueError, "seed"), (dict(seed=2 ** 32), ValueError, "seed"), (dict(seed=1.5), TypeError, "seed"),
    (dict(n_samples=19), ValueError, "n_samples"), (dict(n_samples=True), TypeError, "n_samples")])
def test_mnist1d_refuses_bad_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        sl.tasks.mnist1d(**kwargs)


def test_mnist1d_without_the_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mnist1d", None)
    monkeypatch.setitem(sys.modules, "mnist1d.data", None)
    with pytest.raises(ImportError, match=r"sheaflinalg\[data\]"):
        sl.tasks.mnist1d(n_samples=20)


def test_the_trained_network_is_kept_and_torch_left_as_it_was(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    data = sl.tasks.mnist1d(n_samples=40)
    protocol = mnist1d_cnn.Protocol(epochs=1, batch_size=16)
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    path = str(tmp_path / "cnn.npz")
    net, record = mnist1d_cnn.trained(path, data, protocol, {"n_samples": 40})
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), rng)
    again, _ = mnist1d_cnn.train(data, protocol, progress=False)       # seeded: the same weights
    np.testing.assert_array_equal(again.forward(data.X_test), net.forward(data.X_test))

    def no_training(*args):
        raise AssertionError("trained again")

    monkeypatch.setattr(backprop, "train", no_training)
    kept, kept_record = mnist1d_cnn.trained(path, data, protocol, {"n_samples": 40})
    np.testing.assert_array_equal(kept.forward(data.X_test), net.forward(data.X_test))
    assert kept_record == json.loads(json.dumps(record))
    with pytest.raises(AssertionError, match="trained again"):     # other settings: trained anew
        mnist1d_cnn.trained(path, data, mnist1d_cnn.Protocol(epochs=2, batch_size=16), {"n_samples": 40})
    (tmp_path / "cnn.npz.json").unlink()                            # interrupted before the record
    with pytest.raises(AssertionError, match="trained again"):
        mnist1d_cnn.trained(path, data, protocol, {"n_samples": 40})


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 31), st.integers(1, 6), st.integers(2, 10))
def test_relabelled_logits_make_the_true_class_win(seed, n, classes):
    rng = np.random.default_rng(seed)
    logits = rng.permutation(n * classes).reshape(n, classes).astype(float)     # no ties
    labels = rng.integers(0, classes, n)
    out = relabelled(logits, labels)
    assert out.argmax(axis=1).tolist() == labels.tolist()
    assert np.array_equal(np.sort(out, axis=1), np.sort(logits, axis=1))           # the same values, swapped
    right = logits.argmax(axis=1) == labels
    assert np.array_equal(out[right], logits[right])
