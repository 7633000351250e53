"""The package as shipped: a wheel that carries its data and works outside the repository, the
version written once, and nothing at the repository root but what belongs there."""

import configparser
import json
import pathlib
import subprocess
import zipfile

import pytest

from helpers.paths import ROOT
import sheaflinalg as sl
from sheaflinalg._common.resources import data_names

ROOT_ENTRIES = {".ci", ".gitignore", "README.md", "benchmarks", "docs", "pyproject.toml", "scripts", "setup.cfg",
                "sheaflinalg", "tests"}
SCRIPTS = {"setup.sh", "reproduce_all.py", "normal_tail_coefficients.py"}


def _git_files(*args):
    try:
        out = subprocess.run(["git", "ls-files", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [line for line in out.splitlines() if line]


def test_only_what_belongs_stands_at_the_repository_root():
    # tracked files, and untracked ones that .gitignore does not cover (scratch files, build outputs)
    files = _git_files() + _git_files("--others", "--exclude-standard")
    assert {f.split("/")[0] for f in files} <= ROOT_ENTRIES
    assert {f.split("/")[1] for f in files if f.startswith("scripts/")} <= SCRIPTS


def test_the_version_is_written_once():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["version"] == "attr: sheaflinalg._common.version.VERSION"
    assert "version" not in (ROOT / "pyproject.toml").read_text()
    assert sl.__version__ == sl._common.version.VERSION


RECORDS = """
import sheaflinalg as sl
for name in sl.tasks.TABLE_E1:
    exp = sl.tasks.table_e1(name)
    assert exp.max_relative_error(exp.run(steps=4000, method="sheaf"), "sheaf") < 1e-8, name
    assert exp.max_relative_error(exp.run(steps=4000, method="sgd"), "sgd") < 1e-6, name
assert sl.tasks.load_experiment("paraboloid_1H").network.dims == [2, 30, 1]
assert sl.tasks.paper_sweep("beta_scaling", "s2").network.dims == [2, 30, 1]
assert sl.tasks.paper_sweep("depth_T", "3H").network.dims == [2, 8, 6, 4, 1]
print(sl.__file__, sl.__version__)
"""


@pytest.mark.slow
def test_the_installed_wheel_works_outside_the_repository(installed_wheel, quick_reproduction):
    inst = installed_wheel
    with zipfile.ZipFile(inst.wheel) as whl:
        shipped = set(whl.namelist())
    for folder, suffix in (("table_e1", ".npz"), ("paper_sweeps", ".npz"), ("sweeps", ".toml")):
        for name in data_names(folder, suffix):
            assert f"sheaflinalg/data/{folder}/{name}{suffix}" in shipped
    assert "sheaflinalg/data/spectral_gap_depth.npz" in shipped

    # every recorded Table E.1 experiment replays its first four epochs from the installed copy
    run = inst.run("python", "-c", RECORDS)
    assert run.returncode == 0, run.stderr
    where, version = run.stdout.split()
    assert pathlib.Path(where).is_relative_to(inst.venv) and not pathlib.Path(where).is_relative_to(ROOT)
    assert version == sl.__version__

    run = inst.run("sheaflinalg", "verify")
    assert run.returncode == 0 and "FAILED" not in run.stdout, run.stdout + run.stderr
    # a shipped sweep spec by its name, run from the installed copy
    run = inst.run("sheaflinalg", "sweep", "run", "quick", "--db", "quick.db", "--jobs", "2", "--no-progress")
    assert run.returncode == 0 and "9 runs planned: 9 done now" in run.stdout, run.stdout + run.stderr

    # `sheaflinalg reproduce --quick` (conftest.py): every item, the paper's sweeps in their quick variants
    # (the beta sweep for two betas and 3000 steps, the integration-time sweep's runs of at most 1000 steps)
    index = (quick_reproduction / "index.md").read_text()
    assert f"sheaflinalg {sl.__version__}, quick mode" in index
    for key in ("table_e1", "beta_scaling", "integration_time", "gap_depth"):
        notes = json.loads((quick_reproduction / "done" / f"{key}.json").read_text())["notes"]
        assert "NOT" not in notes, notes
    assert "recorded curves reproduced" in index and "| `[2,30,1]` | 0.2248 |" in (
        quick_reproduction / "tables" / "spectral_gap_depth.md").read_text()
