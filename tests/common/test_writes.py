"""The write rules (docs/errors.md, "Files and writes"): checked up front, exact name, atomic, no temp
left on any error (KeyboardInterrupt included), recognisable temp names, stale temps of dead
processes cleaned at the next write of the same target (also after a real ``kill -9``)."""

import os
import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.paths import ROOT
import sheaflinalg as sl
from sheaflinalg._common import atomic
from sheaflinalg._common.atomic import atomic_file, prepare_target, remove_stale_temps, save_npz, temp_path
from sheaflinalg.cli import main
from sheaflinalg.training.checkpoint import TrainingCheckpoint

UNWRITABLE = "/proc"  # a directory where no process, root included, can create a file
TEMP_NAME = re.compile(r"\.(?P<target>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp")

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ------------------------------------------------------------------------------------- exact name
def test_save_writes_exactly_the_name_asked_for(tmp_path):
    net = sl.Network.random([2, 3, 1], seed=0)
    for name in ("mynet", "mynet.npz", "net.data"):
        net.save(tmp_path / name)
        back = sl.Network.load(tmp_path / name)
        np.testing.assert_array_equal(back.parameters(), net.parameters())
    assert sorted(os.listdir(tmp_path)) == ["mynet", "mynet.npz", "net.data"]


def test_figure_without_extension_is_a_png_under_that_name(tmp_path):
    pytest.importorskip("matplotlib")
    from sheaflinalg.plotting.figure import new_figure

    fig, _ = new_figure()
    atomic.save_figure(fig, tmp_path / "figure")
    atomic.save_figure(fig, tmp_path / "figure.pdf")
    assert sorted(os.listdir(tmp_path)) == ["figure", "figure.pdf"]
    assert (tmp_path / "figure").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "figure.pdf").read_bytes()[:5] == b"%PDF-"


def test_written_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        save_npz(tmp_path / "a.npz", {"x": np.zeros(2)})
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.npz").st_mode & 0o777 == 0o644


# -------------------------------------------------------------------------------- checked up front
@linux_only
def test_targets_are_checked_before_any_work(tmp_path):
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 4, 1], seed=0)
    calls = []
    (tmp_path / "d.npz").mkdir()
    for bad, reason in ((tmp_path / "nodir" / "run.npz", "does not exist"),
                        (f"{UNWRITABLE}/run.npz", "does not accept new files"),
                        (tmp_path / "d.npz", "it is a directory")):
        with pytest.raises(ValueError) as err:
            sl.train(net, X, Y, steps=100, progress=False, checkpoint=bad, callback=calls.append)
        assert str(err.value).startswith("checkpoint: cannot write") and str(bad) in str(err.value)
        assert reason in str(err.value) and ".tmp" not in str(err.value)
    assert calls == []  # no epoch ran
    with pytest.raises(ValueError, match="path: cannot write .*nodir"):
        net.save(tmp_path / "nodir" / "n.npz")
    with pytest.raises(ValueError, match="not a file name"):
        prepare_target("", "path")
    with pytest.raises(TypeError, match="checkpoint must be a file name"):
        sl.train(net, X, Y, steps=100, progress=False, checkpoint=3)
    assert os.listdir(tmp_path) == ["d.npz"] and os.listdir(tmp_path / "d.npz") == []


@linux_only
@pytest.mark.parametrize("argv, option", [
    (["heat", "--no-progress", "--max-steps", "10", "--save-history", f"{UNWRITABLE}/h.npz"], "--save-history"),
    (["heat", "--no-progress", "--max-steps", "10", "--save-history", "nodir/h.npz"], "--save-history"),
    (["train", "--steps", "10", "--no-progress", "--checkpoint", f"{UNWRITABLE}/run.npz"], "--checkpoint"),
    (["train", "--steps", "10", "--no-progress", "--history", f"{UNWRITABLE}/h.csv"], "--history"),
    (["train", "--steps", "10", "--no-progress", "--save", f"{UNWRITABLE}/n.npz"], "--save"),
    (["spectrum", "--no-progress", "--samples", "2", "--plot", f"{UNWRITABLE}/s.png"], "--plot"),
])
def test_command_line_targets_fail_before_the_run_with_one_line(argv, option, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""                                  # nothing ran, nothing was printed
    assert err.count("\n") == 1 and f"{option}: cannot write" in err and argv[-1] in err and ".tmp" not in err


# ------------------------------------------------------------------------------------------- atomic
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_write_leaves_the_old_file_and_no_temp(tmp_path, error):
    target = tmp_path / "out.npz"
    save_npz(target, {"x": np.zeros(3)})
    before = target.read_bytes()
    with pytest.raises(error):
        with atomic_file(target) as f:
            f.write(b"half of a file")
            assert TEMP_NAME.fullmatch(os.path.basename(f.name)).group("pid") == str(os.getpid())
            raise error
    assert target.read_bytes() == before and os.listdir(tmp_path) == ["out.npz"]
    with pytest.raises(error):
        with atomic_file(tmp_path / "new.txt", "w"):
            raise error
    assert os.listdir(tmp_path) == ["out.npz"]


def test_an_interrupted_checkpoint_keeps_the_last_one_valid(tmp_path, monkeypatch):
    ckpt = TrainingCheckpoint(tmp_path / "run.npz", "id")
    ckpt.save({"theta": np.ones(3)}, {"epoch": 1})

    def savez_interrupted(f, **arrays):
        f.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.np, "savez", savez_interrupted)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save({"theta": np.zeros(3)}, {"epoch": 2})
    monkeypatch.undo()
    arrays, meta = ckpt.load()
    assert meta["epoch"] == 1 and arrays["theta"].tolist() == [1.0, 1.0, 1.0]
    assert os.listdir(tmp_path) == ["run.npz"]


# ----------------------------------------------------------------------------------- stale temps
def test_stale_temps_of_dead_processes_are_cleaned_at_the_next_write(tmp_path):
    target = tmp_path / "run.npz"
    dead = temp_path(target, pid=_dead_pid(), token="deadbeef")
    alive = temp_path(target, pid=os.getppid(), token="0badcafe")       # a running process: left alone
    recycled = temp_path(target, pid=os.getpid(), token="12345678")     # our pid, not ours: a dead one's
    other_target = temp_path(tmp_path / "other.npz", pid=_dead_pid(), token="deadbeef")
    unrelated = tmp_path / ".run.npz.notes"
    for p in (dead, alive, recycled, other_target, unrelated):
        open(p, "wb").close()
    save_npz(target, {"x": np.zeros(1)})
    left = sorted(os.listdir(tmp_path))
    assert left == sorted(os.path.basename(p) for p in (alive, other_target, unrelated, target))
    assert remove_stale_temps(tmp_path / "other.npz") == [other_target]


def test_the_checkpoint_check_cleans_stale_temps_before_the_run(tmp_path):
    X, Y = sl.tasks.paraboloid(10, seed=0)
    target = tmp_path / "run.npz"
    stale = temp_path(target, pid=_dead_pid(), token="deadbeef")
    open(stale, "wb").close()
    seen = []
    sl.train(sl.Network.random([2, 3, 1], seed=0), X, Y, steps=20, epoch_steps=10, progress=False,
             checkpoint=target, callback=lambda info: seen.append(os.path.exists(stale)))
    assert seen == [False, False] and os.listdir(tmp_path) == ["run.npz"]


WRITER = textwrap.dedent("""
    import sys, time
    from sheaflinalg._common.atomic import atomic_file
    with atomic_file(sys.argv[1]) as f:
        f.write(b"x" * 100000)
        f.flush()
        print("writing", flush=True)
        time.sleep(60)
""")


@pytest.mark.skipif(os.name != "posix", reason="kill -9 is POSIX")
def test_kill_9_mid_write_leaves_the_old_file_and_the_next_write_cleans_up(tmp_path):
    target = tmp_path / "run.npz"
    save_npz(target, {"x": np.arange(3.0)})
    before = target.read_bytes()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, env=env,
                             text=True)
    try:
        assert child.stdout.readline() == "writing\n"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    temps = [n for n in os.listdir(tmp_path) if n != "run.npz"]
    assert len(temps) == 1 and TEMP_NAME.fullmatch(temps[0]).group("pid") == str(child.pid)
    assert target.read_bytes() == before                       # the old file is whole
    save_npz(target, {"x": np.ones(2)})                        # the next write of the same target
    assert os.listdir(tmp_path) == ["run.npz"]
    with np.load(target) as f:
        assert f["x"].tolist() == [1.0, 1.0]
