"""``sheaflinalg reproduce``: the paper's figures and tables in one command (quick mode), its resumption,
and its refusals."""

import json
import os
import pathlib
import runpy
import signal
import subprocess
import sys
import time

import pytest

from helpers.paths import ROOT
from sheaflinalg.cli import main
from sheaflinalg.reproduce import registry


@pytest.fixture(scope="module")
def quick_run(quick_reproduction):
    """The quick reproduction, run once by the installed wheel (conftest.py) for this file and test_package.py."""
    return quick_reproduction


def test_every_item_writes_its_figures_and_tables(quick_run):
    index = (quick_run / "index.md").read_text()
    for item in registry.ITEMS:
        marker = json.loads((quick_run / "done" / f"{item.key}.json").read_text())
        assert marker["paths"], item.key
        for rel in marker["paths"]:
            path = quick_run / rel
            assert path.stat().st_size > 200, rel
            assert f"]({rel})" in index
        assert item.paper in index
    assert "issue" not in index.lower()                # the index speaks of the library, not of its tracker
    figures = {p.suffix for p in (quick_run / "figures").iterdir()}
    tables = {p.suffix for p in (quick_run / "tables").iterdir()}
    assert figures == {".png", ".pdf"} and {".md", ".tex", ".csv"} <= tables


def test_computed_numbers_are_in_the_tables(quick_run):
    gap = (quick_run / "tables" / "spectral_gap_depth.md").read_text()
    assert "| `[2,30,1]` | 0.2248 |" in gap               # the paper's networks give the paper's numbers
    table = (quick_run / "tables" / "table_e1.md").read_text()
    assert "Paraboloid | 1H" in table and "Blobs | 1H" in table
    pinned = (quick_run / "tables" / "pinned_discord.csv").read_text().splitlines()
    assert pinned[0] == "edge,sheaf_mean,sheaf_std,sgd_mean,sgd_std"
    assert [row.split(",")[0] for row in pinned[1:]] == ["W1", "R1", "W2", "Total"]


def test_a_second_run_keeps_finished_items_and_redoes_a_missing_one(quick_run):
    os.remove(quick_run / "figures" / "phase_planes.png")      # as if killed before the item finished
    done = registry.run_items(quick_run, quick=True, resume=True, progress=False, log=lambda *a: None)
    reused = {item.key for item, _, _, _, kept in done if kept}
    assert reused == {i.key for i in registry.ITEMS} - {"phase_planes"}
    assert (quick_run / "figures" / "phase_planes.png").exists()


def test_unknown_or_no_items_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown item 'nope'"):
        registry.run_items(tmp_path / "a", only=["nope"], progress=False)
    with pytest.raises(ValueError, match="no item named"):
        registry.run_items(tmp_path / "b", only=[], progress=False)
    with pytest.raises(ValueError, match="jobs"):
        registry.run_items(tmp_path / "b", only=["convergence"], jobs=0, progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()     # refused before any work


def _refused(argv, capsys):
    """Exit status 2 and one line of error, before any work (no index written)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_command_refusals(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "exists and is not a directory" in _refused(["reproduce", "--out", str(a_file), "--quick"], capsys)
    assert "cannot create" in _refused(["reproduce", "--out", str(a_file / "sub"), "--quick"], capsys)
    assert "--out" in _refused(["reproduce", "--out", "/proc/sheaflinalg-out", "--quick"], capsys)
    (tmp_path / "blocked").mkdir()
    (tmp_path / "blocked" / "figures").write_text("x")        # where the figures would go
    assert "figures' exists and is not a directory" in _refused(["reproduce", "--out", str(tmp_path / "blocked")],
                                                                capsys)
    assert "did you mean 'table_e1'" in _refused(["reproduce", "tabel_e1", "--out", str(tmp_path / "o")], capsys)
    assert "unknown item ''" in _refused(["reproduce", "", "--out", str(tmp_path / "o")], capsys)
    assert "--only" in _refused(["reproduce", "--only", "--out", str(tmp_path / "o")], capsys)
    assert "either" in _refused(["reproduce", "convergence", "--only", "training", "--out", str(tmp_path / "o")],
                                capsys)
    assert "--jobs" in _refused(["reproduce", "--jobs", "0", "--out", str(tmp_path / "o")], capsys)
    assert not (tmp_path / "o").exists()


def test_the_script_is_the_command(tmp_path, monkeypatch, capsys):
    script = str(ROOT / "scripts" / "reproduce_all.py")
    for argv, status in ((["--list"], 0), (["--only", "--out", str(tmp_path / "o")], 2)):
        monkeypatch.setattr(sys, "argv", ["reproduce_all.py", *argv])
        with pytest.raises(SystemExit) as ex:
            runpy.run_path(script, run_name="__main__")
        assert ex.value.code == status
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == [i.key for i in registry.ITEMS]
    assert "issue" not in out.lower() and "expected at least one argument" in err
    assert not (tmp_path / "o").exists()


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path):
    out = tmp_path / "o"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-m", "sheaflinalg.cli", "reproduce", "phase_planes", "training",
                              "--quick", "--out", str(out), "--no-progress"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not (out / "done" / "phase_planes.json").exists():      # the first item is complete
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)                               # the second one is under way
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines() == ["sheaflinalg reproduce: interrupted; finished items are kept: run the same "
                                        "command with --resume to continue"]
    assert (out / "figures" / "phase_planes.png").exists() and not (out / "done" / "training.json").exists()
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]       # nothing half-written


@pytest.mark.slow
def test_pinned_discord_table_matches_the_paper():
    # The paper's own [2,30,1] paraboloid run (Table E.1 inputs), trained 10^5 steps by each
    # method, pinned on its first 50 test inputs: the paper's table to all printed digits.
    from sheaflinalg.reproduce import discord, output

    out = output.Outputs(pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"pinned-{os.getpid()}")
    discord.pinned_table(out, quick=False)
    rows = (pathlib.Path(out.root) / "tables" / "pinned_discord.md").read_text().splitlines()[2:]
    for row in rows:
        edge, sheaf, sgd, paper_sheaf, paper_sgd = [c.strip() for c in row.strip("|").split("|")]
        assert sheaf.startswith(paper_sheaf) and sgd.startswith(paper_sgd), row
