"""Task generators and the experiment file reader."""

import json

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg import tasks


def test_regression_tasks_follow_their_formulas():
    X, Y = tasks.paraboloid(4000, seed=0)
    assert X.shape == (4000, 2) and Y.shape == (4000, 1)
    assert X.min() >= -2 and X.max() <= 2 and X.min() < -1.99 and X.max() > 1.99
    resid = Y[:, 0] - (X[:, 0] ** 2 + X[:, 1] ** 2 - 2 / 3)
    assert abs(resid.mean()) < 0.002 and resid.std() == pytest.approx(0.02, rel=0.05)
    X, Y = tasks.saddle(4000, seed=1, noise=0.0)
    assert X.min() >= 0 and X.max() <= 2
    np.testing.assert_allclose(Y[:, 0], X[:, 0] ** 2 - X[:, 1] ** 2 + 0.5 * np.sin(2 * X[:, 0]))


def test_classification_tasks_geometry():
    X, Y = tasks.circular(4000, seed=0, noise=0.0)
    r = np.hypot(X[:, 0], X[:, 1])
    y = Y[:, 0]
    assert Y.shape == (4000, 1) and y.sum() == 2000
    assert r[y == 0].max() <= 1 and r[y == 1].min() >= 1.5 and r[y == 1].max() <= 2.5
    assert not np.all(np.diff(y) >= 0)          # shuffled
    X, Y = tasks.blobs(4000, seed=0)
    assert Y.shape == (4000, 4) and np.all(Y.sum(axis=0) == 1000) and np.all(Y.sum(axis=1) == 1)
    for c in range(4):
        pts = X[Y[:, c] == 1]
        np.testing.assert_allclose(pts.mean(axis=0), tasks.BLOB_CENTERS[c], atol=0.1)
        np.testing.assert_allclose(np.cov(pts.T), tasks.BLOB_COVARIANCES[c], atol=0.12)


def test_generators_are_seeded_and_split():
    for name in tasks.TASKS:
        a = tasks.make(name, 30, 10, seed=4)
        b = tasks.make(name, 30, 10, seed=4)
        c = tasks.make(name, 30, 10, seed=5)
        np.testing.assert_array_equal(a.X_train, b.X_train)
        assert not np.array_equal(a.X_train, c.X_train)
        assert a.X_train.shape[0] == 30 and a.X_test.shape[0] == 10 and a.output == tasks.OUTPUTS[name]
    with pytest.raises(ValueError, match="task"):
        tasks.make("moons")
    with pytest.raises(ValueError, match="samples"):
        tasks.paraboloid(0)


def write_experiment(path, rng, output="identity", drop=None):
    dims = [2, 3, 2]
    arrays = {"X_train": rng.normal(size=(2, 5)), "Y_train": rng.normal(size=(2, 5)),
              "X_test": rng.normal(size=(2, 4)), "Y_test": rng.normal(size=(2, 4)),
              "W1": rng.normal(size=(3, 2)), "b1": rng.normal(size=3), "W2": rng.normal(size=(2, 3)),
              "b2": rng.normal(size=2), "z0_1": rng.normal(size=(3, 5)), "a0_1": rng.normal(size=(3, 5)),
              "z0_2": rng.normal(size=(2, 5)), "sheaf_train_curve": np.ones(3), "sheaf_test_curve": np.ones(3),
              "meta": np.array(json.dumps({"arch": dims, "n_steps": 200, "dt": 0.01, "alpha": 1.0, "beta": 0.2,
                                           "output_activation": output, "init_method": "random",
                                           "warm_start": True, "sgd_lr": 0.01}))}
    if drop:
        arrays.pop(drop)
    np.savez(path, **arrays)
    return arrays


def test_load_experiment_reads_the_format(tmp_path, rng):
    arrays = write_experiment(tmp_path / "e.npz", rng)
    exp = tasks.load_experiment(tmp_path / "e.npz")
    np.testing.assert_array_equal(exp.X_train, arrays["X_train"].T)
    np.testing.assert_array_equal(exp.Y_test, arrays["Y_test"].T)
    np.testing.assert_array_equal(exp.network.weights[1], arrays["W2"])
    np.testing.assert_array_equal(exp.init, np.concatenate([arrays["z0_1"].T, arrays["a0_1"].T,
                                                            arrays["z0_2"].T], axis=1))
    assert exp.meta["beta"] == 0.2 and exp.sgd_record_every == 2
    hist = exp.run(steps=3, epoch_steps=1)
    # The first step starts from the file's stalks: compare with sl.train given them explicitly.
    fit = sl.train(exp.network, exp.X_train, exp.Y_train, beta=0.2, dt=0.01, steps=3, epoch_steps=1,
                   init=exp.init, progress=False)
    assert hist.train_loss == fit.history.train_loss
    assert len(exp.run(steps=6, method="sgd").train_loss) == 4
    with pytest.raises(ValueError, match="method"):
        exp.run(method="adam")


def test_load_experiment_rejects_bad_files(tmp_path, rng):
    write_experiment(tmp_path / "e.npz", rng, drop="W1")
    with pytest.raises(ValueError, match="W1"):
        tasks.load_experiment(tmp_path / "e.npz")
    write_experiment(tmp_path / "f.npz", rng, drop="z0_2")
    with pytest.raises(ValueError, match="z0_2"):
        tasks.load_experiment(tmp_path / "f.npz")
    np.savez(tmp_path / "g.npz", X_train=np.array([object()], dtype=object))
    with pytest.raises(ValueError):
        tasks.load_experiment(tmp_path / "g.npz")
    with pytest.raises(ValueError, match="Table E.1"):
        tasks.table_e1("moons_1H")


def test_shipped_table_e1_files_match_the_generators_protocol():
    for name in tasks.TABLE_E1:
        exp = tasks.table_e1(name)
        task = name.split("_")[0]
        assert exp.network.output == tasks.OUTPUTS[task]
        assert exp.X_train.shape == (300, 2) and exp.X_test.shape == (100, 2)
        assert exp.meta["beta"] == pytest.approx(1 / 300)
