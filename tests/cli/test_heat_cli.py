"""The ``sheaflinalg heat`` command."""

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.cli import main


def test_heat_command_converges_and_writes_history(tmp_path, capsys):
    path = tmp_path / "h.npz"
    assert main(["heat", "--no-progress", "--record-every", "50", "--save-history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "converged: True" in out and "max |output - forward pass|" in out
    err = float(out.split("max |output - forward pass|: ")[1].split()[0])
    assert err < 1e-9
    with np.load(path, allow_pickle=False) as f:
        assert list(f["labels"]) == ["e_z1", "e_a1", "e_z2"]
        assert f["discord"].shape == (f["steps"].size, 3)
        assert f["crossings"].shape[1] == 5
        net = sl.Network.random([2, 4, 1], seed=0)
        X = np.random.default_rng(0).uniform(-2, 2, size=(1, 2))
        np.testing.assert_allclose(f["output"], net.forward(X), atol=1e-9)


def test_heat_command_with_pins(capsys):
    assert main(["heat", "--no-progress", "--arch", "2,5,3,1", "--output", "sigmoid", "--samples", "2",
                 "--pin", "a1[0]=1.0", "--soft-pin", "z2[1]=0.5", "--gamma", "4"]) == 0
    out = capsys.readouterr().out
    assert "pinned: a1[0]; soft pins: z2[1]" in out and "pin " in out


def test_heat_command_threads_give_the_one_thread_result(capsys):
    outs = []
    for threads in ("1", "2"):
        assert main(["heat", "--no-progress", "--arch", "2,8,1", "--samples", "80", "--tol", "1e-10",
                     "--threads", threads]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "converged: True" in outs[0]


@pytest.mark.parametrize("argv, match", [
    (["heat", "--dt", "1.0"], "largest stable dt"),
    (["heat", "--pin", "q=1"], "no free block 'q'"),
    (["heat", "--pin", "a1[0]"], "SELECTOR=VALUE"),
    (["heat", "--input", "1,x"], "--input"),
    (["heat", "--save-history", "/nonexistent/dir/h.npz"], "does not exist"),
    (["heat", "--threads", "0"], "threads must be"),
])
def test_heat_command_errors(argv, match, capsys):
    assert main(argv + ["--no-progress"]) == 2
    assert match in capsys.readouterr().err
