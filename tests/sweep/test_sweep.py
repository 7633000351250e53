"""Parameter sweeps: specs, refusals, the store's resume after kill -9, executors agreeing row for row."""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import tomllib

import pytest

from helpers.paths import ROOT
import sheaflinalg as sl
from sheaflinalg._common.resources import data_path
from sheaflinalg.cli import main
from sheaflinalg.sweep import spec as sweep_spec

VERIFY = {"sweep": {"function": "verify", "metrics": ["passed", "n_samples"]},
          "fixed": {"arch": [2, 6, 1]}, "grid": {"seed": {"range": [0, 4, 1]}, "n_inputs": [2, 5]}}
TRAIN = {"sweep": {"function": "train", "metrics": ["final_train_loss", "final_test_loss", "steps"]},
         "fixed": {"arch": [2, 8, 1], "n_test": 20, "steps": 300, "epoch_steps": 100},
         "grid": {"n_train": [20, 40], "seed": [0, 1]}, "derived": {"beta": "2 / n_train"}}


def test_grid_zip_ranges_and_derived_values():
    s = sweep_spec.load({"sweep": {"function": "train", "metrics": ["final_test_loss"], "labels": ["T"]},
                         "fixed": {"n_test": 10},
                         "grid": {"alpha": {"logspace": [-1, 1, 3]}, "seed": {"range": [0, 2, 1]}},
                         "zip": {"T": [1.0, 2.0], "dt": {"linspace": [0.01, 0.02, 2]}},
                         "derived": {"steps": "max(int(T / dt), 100)", "epoch_steps": "min(steps, 50)"}})
    assert len(s.runs) == 3 * 2 * 2
    assert sorted({r["alpha"] for r in s.runs}) == pytest.approx([0.1, 1.0, 10.0])
    assert {(r["T"], r["dt"]) for r in s.runs} == {(1.0, 0.01), (2.0, 0.02)}
    assert all(r["steps"] == 100 and r["epoch_steps"] == 50 for r in s.runs)
    assert s.axes == ["alpha", "seed", "T", "dt", "steps", "epoch_steps"]
    assert len(set(s.run_ids())) == len(s.runs)               # every run its own identity
    assert sweep_spec.load(dict(VERIFY)).run_ids() == sweep_spec.load(dict(VERIFY)).run_ids()


REFUSALS = [
    ({"sweep": {"function": "train", "metrics": ["final_test_loss"]}, "fixed": {"n_tset": 10}},
     "`n_tset` is not a parameter of train; did you mean `n_test`?"),
    ({"sweep": {"function": "train", "metric": ["final_test_loss"]}}, "unknown key `metric`"),
    ({"sweep": {"function": "train", "metrics": ["final_test_los"]}}, "unknown metric `final_test_los`"),
    ({"sweep": {"function": "fit", "metrics": ["x"]}}, "unknown function 'fit'"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"steps": "100"}}, "`steps` must be int"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"dt": True}}, "`dt` must be float"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "derived": {"beta": "2 / n_trian"}},
     "`n_trian` is not a parameter of this sweep"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "derived": {"beta": "__import__('os')"}},
     "only the functions"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "zip": {"dt": [0.1, 0.2], "alpha": [1.0]}},
     "equal lengths"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "grid": {"seed": {"range": [0, 5]}}},
     "needs three numbers"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "grdi": {"seed": [1]}}, "unknown section [grdi]"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"seed": 1}, "grid": {"seed": [1, 2]}},
     "`seed` is also set in [fixed]"),
    ({"sweep": {"function": "train", "metrics": ["lambda_min_median"]}}, "needs spectral tracking"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"arch": [2, 0, 1]}}, "`arch` must be"),
    # hostile specs: refused before any run, by the rule that covers them
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"max_steps": "10**10**10"}},
     "refused before computing it"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"max_steps": "round(7, -10**12)"}},
     "refused before computing it"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"max_steps": "2**64"}}, "must fit in 64 bits"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"dt": "float(10**400)"}},
     "too large for a float"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"dt": "-(" * 600 + "1" + ")" * 600}},
     "at most 1000 characters"),
    ({"sweep": {"function": "heat", "metrics": ["steps"], "labels": ["status"]}, "fixed": {"status": 1}},
     "`status`: a reserved name"),
    ({"sweep": {"function": "heat", "metrics": ["steps"], "labels": ["Run_ID"]}, "grid": {"Run_ID": [1, 2]}},
     "a reserved name"),
    ({"sweep": {"function": "train", "metrics": ["steps"], "labels": ["T", "t"]}, "fixed": {"T": 1.0},
      "zip": {"t": [1, 2]}}, "`t` and `T` (in [fixed]) differ only by case"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "grid": {"seed": {"range": [0, 10**9, 1]}}},
     "the plan has 1,000,000,000 runs"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]},
      "grid": {"dt": {"linspace": [0.1, 1, 10**5]}, "seed": [0, 1]}}, "the plan has 200,000 runs"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "grid": {"dt": [0.1, float("nan")]}},
     "`dt` must be a finite number > 0, got nan"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "derived": {"tol": "-1.0"}},
     "`tol` must be a finite number >= 0"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"task": "parabolid"}},
     "unknown task 'parabolid'; did you mean `paraboloid`?"),
    ({"sweep": {"function": "spectrum", "metrics": ["seconds"]}, "grid": {"system": ["reduced", "fre"]}},
     "did you mean `free`?"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "grid": {"seed": [0, -1]}}, "`seed` must be an integer >= 0"),
    ({"sweep": {"function": "train", "metrics": ["steps"], "name": {"a": 1}}}, "[sweep] name"),
    ({"sweep": {"function": "heat", "metrics": ["steps"]}, "grid": {"arch": [[2, 4, 1], [3, 4, 1]]}},
     "`arch` [3, 4, 1] takes 3 inputs, but the samples of task 'paraboloid' have 2"),
    ({"sweep": {"function": "train", "metrics": ["steps"]}, "fixed": {"task": "blobs", "arch": [2, 4, 1]}},
     "has 1 outputs, but the targets of task 'blobs' have 4"),
]


@pytest.mark.parametrize("raw,message", REFUSALS, ids=[m for _, m in REFUSALS])
def test_refusals_name_the_key_and_write_nothing(raw, message, tmp_path):
    db = tmp_path / "runs.db"
    with pytest.raises(sl.sweep.SpecError) as err:
        sl.sweep.run(raw, db, jobs=1, progress=False)
    assert message in str(err.value)
    assert not db.exists()


def test_command_line_refusals_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\nfunction = "train"\nmetrics = ["final_test_loss"]\n[fixed]\nn_tset = 10\n')
    assert main(["sweep", "run", str(bad), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean `n_test`?" in err[0]
    broken = tmp_path / "broken.toml"
    broken.write_text("[sweep\nfunction = 1")
    assert main(["sweep", "run", str(broken), "--db", str(tmp_path / "r.db")]) == 2
    assert "malformed TOML" in capsys.readouterr().err
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe[sweep]")
    for path, why in ((binary, "not a TOML text file"), (tmp_path, "cannot read")):  # binary file, directory
        assert main(["sweep", "run", str(path), "--db", str(tmp_path / "r.db")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(path) in err[0] and why in err[0], err
    assert not (tmp_path / "r.db").exists()


def _rows(db):
    return sorted((r["run_id"], r["status"], json.dumps(r["metrics"], sort_keys=True))
                  for r in sl.sweep.load(db, records=True))


def test_serial_pool_and_dask_give_the_same_rows(tmp_path):
    pytest.importorskip("dask.distributed")
    from dask.distributed import Client, LocalCluster

    serial, pooled, dasked = tmp_path / "s.db", tmp_path / "p.db", tmp_path / "d.db"
    assert sl.sweep.run(TRAIN, serial, jobs=1, progress=False)["done"] == 4
    assert sl.sweep.run(TRAIN, pooled, jobs=2, progress=False)["done"] == 4
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert sl.sweep.run(TRAIN, dasked, client=client, progress=False)["done"] == 4
    assert _rows(serial) == _rows(pooled) == _rows(dasked)
    assert all(r[1] == "done" for r in _rows(serial))


def test_rerun_skips_done_runs_and_failed_runs_are_kept_or_retried(tmp_path):
    db = tmp_path / "r.db"
    assert sl.sweep.run(VERIFY, db, jobs=1, progress=False) == {"planned": 8, "done": 8, "failed": 0, "skipped": 0,
                                                            "elsewhere": 0}
    assert sl.sweep.run(VERIFY, db, jobs=1, progress=False)["skipped"] == 8
    unstable = {"sweep": {"function": "heat", "metrics": ["steps"]}, "fixed": {"arch": [2, 4, 1], "dt": 50.0},
                "grid": {"seed": [0, 1]}}
    counts = sl.sweep.run(unstable, db, jobs=1, progress=False)
    assert counts["failed"] == 2
    failed = [r for r in sl.sweep.load(db, records=True) if r["status"] == "failed"]
    assert len(failed) == 2 and all("is unstable for explicit Euler" in r["error"] for r in failed)
    assert sl.sweep.run(unstable, db, jobs=1, progress=False)["skipped"] == 2
    assert sl.sweep.run(unstable, db, jobs=1, retry_failed=True, progress=False)["failed"] == 2
    assert len(sl.sweep.load(db, records=True)) == 10                  # updated in place, no duplicates
    status = {s["name"]: s for s in sl.sweep.status(db)}
    assert status["heat"]["failed"] == 2 and status["verify"]["done"] == 8


def test_csv_export_round_trips(tmp_path):
    db, path = tmp_path / "r.db", tmp_path / "r.csv"
    sl.sweep.run(TRAIN, db, jobs=1, progress=False)
    assert sl.sweep.export_csv(db, path) == 4
    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    records = {json.dumps(r["params"], sort_keys=True): r for r in sl.sweep.load(db, records=True)}
    for row in table:
        params = {k: (v if k == "task" else json.loads(v)) for k, v in row.items()
                  if k in ("arch", "n_test", "steps", "epoch_steps", "n_train", "seed", "beta")}
        rec = records[json.dumps(params, sort_keys=True)]
        assert json.loads(row["final_test_loss"]) == rec["metrics"]["final_test_loss"]
        assert json.loads(row["steps (metric)"]) == rec["metrics"]["steps"]
        assert row["status"] == "done"


def test_pandas_or_records(tmp_path):
    db = tmp_path / "r.db"
    sl.sweep.run(VERIFY, db, jobs=1, progress=False)
    rows = sl.sweep.load(db)
    try:
        import pandas  # noqa: F401
        assert list(rows["passed"]) == [True] * 8
    except ImportError:
        assert [r["passed"] for r in rows] == [True] * 8


def _sweep_child(spec_path, db):
    code = f"import sheaflinalg as sl; sl.sweep.run({str(spec_path)!r}, {str(db)!r}, jobs=2, progress=False)"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_a_sweep_killed_with_sigkill_resumes_with_every_run_once(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(textwrap.dedent("""
        [sweep]
        function = "train"
        metrics = ["final_test_loss"]
        [fixed]
        arch = [2, 30, 1]
        n_train = 100
        n_test = 10
        steps = 60000
        [grid]
        seed = { range = [0, 16, 1] }
    """))
    db = tmp_path / "r.db"
    child = _sweep_child(spec, db)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:               # kill once some, not all, runs are stored
        time.sleep(0.05)
        try:
            n = len(sl.sweep.load(db, records=True))
        except sl.sweep.StoreError:                  # not there yet, or being created
            n = 0
        if n >= 2:
            break
    os.killpg(child.pid, signal.SIGKILL)              # the driver and its workers
    child.wait()
    before = len(sl.sweep.load(db, records=True))
    assert 1 <= before < 16
    counts = sl.sweep.run(spec, db, jobs=2, progress=False)
    assert counts["skipped"] == before and counts["done"] == 16 - before
    rows = sl.sweep.load(db, records=True)
    assert len(rows) == 16 and len({r["run_id"] for r in rows}) == 16
    assert sorted(r["params"]["seed"] for r in rows) == list(range(16))
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("name,steps", [("integration_time", None), ("beta_scaling", 3000)])
def test_the_paper_sweeps_replay_their_records(name, steps, tmp_path):
    with open(data_path("sweeps", f"{name}.toml"), "rb") as f:   # the shipped spec
        raw = tomllib.load(f)
    if name == "integration_time":        # quick variant: the runs of at most 1000 steps
        keep = [i for i, s in enumerate(raw["zip"]["steps"]) if s <= 1000]
        raw["zip"] = {k: [v[i] for i in keep] for k, v in raw["zip"].items()}
    else:                                 # quick variant: the first 3000 steps, two betas, every seed
        raw["fixed"]["steps"] = steps
        raw["grid"]["beta"] = [0.001, 0.00333]
    db = tmp_path / "r.db"
    counts = sl.sweep.run(raw, db, jobs=2, progress=False)
    assert counts["failed"] == 0 and counts["done"] >= 6
    errors = [r["metrics"]["max_rel_error_to_record"] for r in sl.sweep.load(db, records=True)]
    assert all(e is not None and e < 1e-12 for e in errors)


def test_sweep_command_end_to_end(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nfunction = "spectrum"\nmetrics = ["lambda_min_median", "condition_median"]\n'
                    '[fixed]\nn_inputs = 10\n[grid]\narch = [[2, 10, 1], [2, 10, 8, 1]]\n')
    db, out, table = tmp_path / "r.db", tmp_path / "f.png", tmp_path / "r.csv"
    assert main(["sweep", "run", str(spec), "--db", str(db), "--jobs", "1", "--no-progress"]) == 0
    assert main(["sweep", "status", str(db)]) == 0
    assert "spectrum" in capsys.readouterr().out
    assert main(["sweep", "export", str(db), "--csv", str(table)]) == 0
    assert len(table.read_text().splitlines()) == 3
    assert main(["sweep", "plot", str(db), "--x", "n_inputs", "--y", "lambda_min_median", "--out", str(out)]) == 0
    assert out.stat().st_size > 1000


def test_the_readme_sweep_commands_run(tmp_path, monkeypatch):
    import re

    monkeypatch.chdir(tmp_path)
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\.venv/bin/sheaflinalg (sweep .*)$", readme, flags=re.M)
    assert [c.split()[1] for c in commands] == ["run", "status", "export", "plot"]
    for command in commands:
        assert main(command.split()) == 0, command    # `sweep run quick`: the shipped spec by name
    assert len((tmp_path / "quick.csv").read_text().splitlines()) == 10
    assert (tmp_path / "quick.png").stat().st_size > 1000


def test_a_database_that_is_not_a_sweep_store_is_refused(tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(ValueError, match="not a sweep database"):
        sl.sweep.run(VERIFY, other, jobs=1, progress=False)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ValueError, match="not a sweep database"):
        sl.sweep.status(junk)
