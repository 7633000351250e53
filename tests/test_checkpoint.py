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
