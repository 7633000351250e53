"""Interrupted training runs resume from their checkpoint exactly; foreign or corrupt checkpoints are refused."""

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.training.checkpoint import TrainingCheckpoint


class Interrupt(Exception):
    pass


def _stop_at(epoch):
    def callback(info):
        if info.epoch == epoch:
            raise Interrupt
    return callback


@pytest.mark.parametrize("warm_start, init, reg", [(True, "random", None),
                                                    (False, "random", {"lam": 1e-3, "anchor": "initial"})])
def test_interrupted_run_resumes_bit_for_bit(tmp_path, warm_start, init, reg):
    X, Y = sl.tasks.paraboloid(60, seed=1)
    net = sl.Network.random([2, 8, 1], seed=2)
    kw = dict(steps=6000, epoch_steps=500, seed=3, progress=False, warm_start=warm_start, init=init, reg=reg)
    full = sl.train(net, X, Y, **kw)
    path = tmp_path / "run.npz"
    with pytest.raises(Interrupt):
        sl.train(net, X, Y, checkpoint=path, checkpoint_every=2, callback=_stop_at(7), **kw)
    assert path.exists()
    resumed = sl.train(net, X, Y, checkpoint=path, checkpoint_every=2, **kw)
    np.testing.assert_array_equal(resumed.network.parameters(), full.network.parameters())
    np.testing.assert_array_equal(resumed.state, full.state)
    assert resumed.history.epoch == full.history.epoch
    assert resumed.history.train_loss == full.history.train_loss
    assert resumed.history.stagnation["bound"] == full.history.stagnation["bound"]
    # Resuming a finished run does no more work and returns the same result.
    again = sl.train(net, X, Y, checkpoint=path, **kw)
    np.testing.assert_array_equal(again.network.parameters(), full.network.parameters())


def test_foreign_and_corrupt_checkpoints_are_refused(tmp_path):
    X, Y = sl.tasks.paraboloid(30, seed=1)
    net = sl.Network.random([2, 4, 1], seed=0)
    path = tmp_path / "run.npz"
    sl.train(net, X, Y, steps=1000, progress=False, seed=0, checkpoint=path)
    with pytest.raises(ValueError, match="another run"):
        sl.train(net, X, Y, steps=1000, dt=0.004, progress=False, seed=0, checkpoint=path)
    with pytest.raises(ValueError, match="another run"):
        sl.train(net, X + 1.0, Y, steps=1000, progress=False, seed=0, checkpoint=path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        sl.train(net, X, Y, steps=1000, progress=False, seed=0, checkpoint=path)
    other = tmp_path / "other.npz"
    np.savez(other, theta=np.zeros(3))
    with pytest.raises(ValueError, match="not a sheaflinalg training checkpoint"):
        TrainingCheckpoint(other, "x").load()
    with pytest.raises(ValueError, match=".npz"):
        sl.train(net, X, Y, steps=1000, progress=False, checkpoint=tmp_path / "run.ckpt")


def test_generator_seeds_tell_runs_apart(tmp_path):
    X, Y = sl.tasks.paraboloid(20, seed=1)
    net = sl.Network.random([2, 4, 1], seed=0)

    def gen(seed):
        return np.random.Generator(np.random.PCG64(seed))

    kw = dict(steps=400, epoch_steps=100, progress=False)
    full = sl.train(net, X, Y, seed=gen(5), **kw)
    path = tmp_path / "run.npz"
    with pytest.raises(Interrupt):
        sl.train(net, X, Y, seed=gen(5), checkpoint=path, checkpoint_every=1, callback=_stop_at(3), **kw)
    with pytest.raises(ValueError, match="another run"):
        sl.train(net, X, Y, seed=gen(6), checkpoint=path, **kw)
    resumed = sl.train(net, X, Y, seed=gen(5), checkpoint=path, **kw)
    np.testing.assert_array_equal(resumed.network.parameters(), full.network.parameters())
    assert resumed.history.train_loss == full.history.train_loss


def _rewrite(path, run_id, change_arrays=None, change_meta=None):
    """Rewrite the checkpoint through its own writer (a valid digest) with some entries changed."""
    arrays, meta = TrainingCheckpoint(path, run_id).load()
    meta = {k: v for k, v in meta.items() if k not in ("format", "run_id")}
    arrays.update(change_arrays or {})
    for key, value in (change_meta or {}).items():
        if key.startswith("history."):
            meta["history"] = dict(meta["history"], **{key[8:]: value})
        else:
            meta[key] = value
    TrainingCheckpoint(path, run_id).save({k: v for k, v in arrays.items() if v is not None}, meta)


@pytest.mark.parametrize("arrays, meta, named", [
    ({"S": "transpose"}, {}, "entry 'S' must have shape (10, 12), got (12, 10)"),
    ({"S": "shorten"}, {}, "entry 'S' must have shape (10, 12)"),
    ({"theta": "shorten"}, {}, "entry 'theta' must have shape (17,)"),
    ({"S": "nan"}, {}, "entry 'S' holds NaN"),
    ({"S_anchor": None}, {}, "missing entries ['S_anchor']"),
    ({"S": "yhat"}, {}, "entry 'S' does not hold the run's targets"),
    ({}, {"epoch": 4}, "field 'step' must be 400"),
    ({}, {"epoch": 9, "step": 400}, "field 'epoch' must be an integer in [1, 4]"),
    ({}, {"epoch": True}, "field 'epoch'"),
    ({}, {"epoch": 4, "step": 400}, "field 'history'"),
    ({}, {"history.train_loss": [1.0]}, "train_loss must be a list of 3 records"),
    ({}, {"history.stagnation": {}}, "stagnation must have exactly the fields"),
    ({}, {"rng": np.random.MT19937(0).state}, "field 'rng' must be the state of a PCG64"),
    ({}, {"rng": dict(np.random.PCG64(0).state, state={"state": -1, "inc": 1})}, "field 'rng' is not a valid"),
])
def test_checkpoint_entries_are_checked_against_the_run(tmp_path, arrays, meta, named):
    X, Y = sl.tasks.paraboloid(12, seed=1)
    net = sl.Network.random([2, 4, 1], seed=0)
    kw = dict(steps=400, epoch_steps=100, progress=False, seed=1, reg={"lam": 1e-3})
    path = tmp_path / "run.npz"
    with pytest.raises(Interrupt):
        sl.train(net, X, Y, checkpoint=path, checkpoint_every=1, callback=_stop_at(3), **kw)
    run_id = str(np.load(path)["meta"]).split('"run_id": "')[1].split('"')[0]
    saved, _ = TrainingCheckpoint(path, run_id).load()
    edits = {"transpose": lambda a: a.T.copy(), "shorten": lambda a: a[..., :-1].copy(),
             "nan": lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0, np.nan, a),
             "yhat": lambda a: np.where(np.arange(a.shape[0])[:, None] == a.shape[0] - 1, a + 1.0, a)}
    _rewrite(path, run_id, {k: None if v is None else edits[v](saved[k]) for k, v in arrays.items()}, meta)
    with pytest.raises(ValueError) as err:
        sl.train(net, X, Y, checkpoint=path, **kw)
    assert str(err.value).startswith(str(path)) and named in str(err.value), str(err.value)
