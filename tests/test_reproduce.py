"""The one-command reproduction of the paper's figures and tables (quick mode), and its resumption."""

import json
import os
import pathlib
import runpy
import sys

import pytest

from sheaflinalg.reproduce import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper")
    argv = ["reproduce_all.py", "--out", str(out), "--quick", "--jobs", "1", "--no-progress"]
    old = sys.argv
    sys.argv = argv
    try:
        with pytest.raises(SystemExit) as ex:
            runpy.run_path(str(ROOT / "scripts" / "reproduce_all.py"), run_name="__main__")
    finally:
        sys.argv = old
    assert ex.value.code == 0
    return out


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


def test_unknown_items_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown items"):
        registry.run_items(tmp_path, only=["nope"], progress=False)


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
