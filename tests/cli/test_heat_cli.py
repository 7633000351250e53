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


def test_heat_command_runs_the_implicit_scheme_on_a_graph_network(tmp_path, capsys):
    rng = np.random.default_rng(0)
    net = sl.Network.from_nodes((4,), [
        sl.Node("fc", "linear", ["x"], params={"weight": rng.normal(size=(6, 4)), "bias": np.zeros(6)}),
        sl.Node("g", "gelu", ["fc"], {"approximate": "none"}),
        sl.Node("out", "linear", ["g"], params={"weight": rng.normal(size=(2, 6)), "bias": np.zeros(2)})])
    path = tmp_path / "net.npz"
    net.save(path)
    assert main(["heat", "--network", str(path), "--method", "implicit", "--samples", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "converged: True" in out
    assert float(out.split("max |output - forward pass|: ")[1].split()[0]) < 1e-12
    assert int(out.split("steps: ")[1].split()[0]) < 20
    # an Euler-only option and a chain are refused with one line each
    assert main(["heat", "--network", str(path), "--method", "implicit", "--output-force", "adjoint"]) == 2
    assert main(["heat", "--method", "implicit", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "does not use output_force" in err and "graph" in err
