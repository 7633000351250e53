"""The sweep store and drivers under hostile conditions: foreign, damaged and locked databases, names
registered twice, unknown plot columns, too many workers, dead drivers and their workers, Ctrl-C, two
drivers on one store."""

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

import sheaflinalg as sl
from sheaflinalg._common import threads
from sheaflinalg.cli import main
from sheaflinalg.sweep import execute, store as sweep_store

VERIFY = {"sweep": {"function": "verify", "metrics": ["passed"]},
          "fixed": {"arch": [2, 4, 1], "n_inputs": 2}, "grid": {"seed": [0, 1, 2, 3]}}
linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_application(path):
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        con.execute("INSERT INTO notes (text) VALUES ('keep me')")
    con.close()


def test_another_applications_database_is_refused_untouched(tmp_path, capsys):
    other = tmp_path / "app.db"
    _other_application(other)
    before = _digest(other)
    for argv in (["sweep", "status", str(other)], ["sweep", "export", str(other), "--csv", str(tmp_path / "x.csv")],
                 ["sweep", "plot", str(other), "--x", "seed", "--y", "passed", "--out", str(tmp_path / "x.png")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a sweep database (tables notes)" in err[0], err
    with pytest.raises(sl.sweep.StoreError, match="not a sweep database"):
        sl.sweep.run(VERIFY, other, jobs=1, progress=False)
    with pytest.raises(sl.sweep.StoreError, match="not a sweep database"):
        sl.sweep.load(other)
    assert _digest(other) == before
    with sqlite3.connect(other) as con:
        assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["notes"]
    con.close()
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.png").exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(sl.sweep.StoreError, match="an empty database: no sweep has been run into it"):
        sl.sweep.status(empty)
    assert empty.read_bytes() == b""


def test_reading_a_store_never_writes_it(tmp_path, capsys):
    db = tmp_path / "r.db"
    sl.sweep.run(VERIFY, db, jobs=1, progress=False)
    before = _digest(db)
    os.chmod(db, 0o444)                 # a read-only file: any write would fail loudly
    try:
        assert main(["sweep", "status", str(db)]) == 0
        assert sl.sweep.status(db)[0]["done"] == 4
        assert len(sl.sweep.load(db, records=True)) == 4
        assert main(["sweep", "export", str(db), "--csv", str(tmp_path / "r.csv")]) == 0
    finally:
        os.chmod(db, 0o644)
    assert _digest(db) == before
    capsys.readouterr()
    assert main(["sweep", "export", str(db), "--csv", str(db)]) == 2   # would replace the store by a CSV
    assert "is the database itself" in capsys.readouterr().err
    assert _digest(db) == before


def test_a_store_of_the_earlier_version_still_opens(tmp_path):
    db = tmp_path / "old.db"
    schema = sweep_store.SCHEMA.split("CREATE TABLE IF NOT EXISTS claims")[0]    # runs and sweeps, no mark
    with sqlite3.connect(db) as con:
        con.executescript(schema)
    con.close()
    assert sl.sweep.status(db) == []                                   # read-only: accepted as it is
    assert sl.sweep.run(VERIFY, db, jobs=1, progress=False)["done"] == 4
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == sweep_store.APPLICATION_ID
    con.close()


def test_a_damaged_or_locked_store_is_one_clear_line(tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.db"
    sl.sweep.run(VERIFY, db, jobs=1, progress=False)
    with sqlite3.connect(db) as con:                # one database file, no WAL beside it
        con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)      # every page but the first overwritten
    db.write_bytes(bytes(data))
    assert main(["sweep", "status", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged" in err[0] and str(db) in err[0], err

    locked = tmp_path / "locked.db"
    sl.sweep.run(VERIFY, locked, jobs=1, progress=False)
    monkeypatch.setattr(sweep_store, "BUSY_MS", 200)
    holder = sqlite3.connect(locked, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sl.sweep.StoreError, match="stayed locked by another process") as err:
            sl.sweep.run(dict(VERIFY, grid={"seed": [7]}), locked, jobs=1, progress=False)
        assert str(locked) in str(err.value) and "\n" not in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_one_name_one_specification(tmp_path):
    db = tmp_path / "r.db"
    other = dict(VERIFY, grid={"seed": [10, 11]})         # the same default name "verify", other runs
    assert sl.sweep.run(VERIFY, db, jobs=1, progress=False)["done"] == 4
    with pytest.raises(sl.sweep.StoreError, match="a sweep named 'verify' with another specification"):
        sl.sweep.run(other, db, jobs=1, progress=False)
    named = dict(other, sweep=dict(VERIFY["sweep"], name="more"))
    assert sl.sweep.run(named, db, jobs=1, progress=False)["done"] == 2
    reordered = dict(VERIFY, grid={"seed": [3, 2, 1, 0]})  # the same runs: the same sweep, resumed
    assert sl.sweep.run(reordered, db, jobs=1, progress=False)["skipped"] == 4
    for s in sl.sweep.status(db):                          # status and load describe the same runs
        rows = sl.sweep.load(db, sweep=s["name"], records=True)
        assert s["planned"] == len(rows) == s["done"]
    with pytest.raises(sl.sweep.StoreError, match="no sweep named 'Verify'; it holds 'verify'"):
        sl.sweep.load(db, sweep="Verify")


def test_plot_refuses_an_unknown_column_with_a_suggestion(tmp_path, capsys):
    db = tmp_path / "r.db"
    sl.sweep.run(VERIFY, db, jobs=1, progress=False)
    out = tmp_path / "f.png"
    assert main(["sweep", "plot", str(db), "--x", "seed", "--y", "passed", "--hue", "sede", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hue: no column 'sede'; did you mean 'seed'?" in err[0], err
    assert main(["sweep", "plot", str(db), "--x", "seed", "--y", "bogus", "--out", str(out)]) == 2
    assert "y: no column 'bogus'" in capsys.readouterr().err
    assert main(["sweep", "plot", str(db), "--x", "arch", "--y", "passed", "--out", str(out)]) == 2
    assert "the x axis needs numbers (use it as --hue)" in capsys.readouterr().err
    assert not out.exists()
    assert main(["sweep", "plot", str(db), "--x", "seed", "--y", "passed", "--hue", "arch", "--out", str(out)]) == 0


def test_a_file_in_the_place_of_the_artifacts_directory_is_refused_before_any_run(tmp_path):
    db = tmp_path / "r.db"
    (tmp_path / "r.db.artifacts").write_text("mine")
    with pytest.raises(sl.sweep.StoreError, match="a file has its name"):
        sl.sweep.run(dict(VERIFY, sweep={"function": "heat", "metrics": ["steps"]}), db, jobs=1, progress=False)
    assert not db.exists()


def test_workers_are_never_more_than_runs_or_cores(tmp_path, monkeypatch):
    seen = []

    def fake_pool(function, runs, labels, jobs, tick=None, context=None):
        seen.append(jobs)
        return execute.serial(function, runs, labels, context=context)

    monkeypatch.setattr(execute, "pool", fake_pool)
    monkeypatch.setattr(threads, "available_cores", lambda: 3)
    sl.sweep.run(VERIFY, tmp_path / "a.db", jobs=24, progress=False)      # 4 runs, 3 cores
    sl.sweep.run(dict(VERIFY, grid={"seed": [0, 1]}, sweep=dict(VERIFY["sweep"], name="two")),
                 tmp_path / "b.db", jobs=24, progress=False)              # 2 runs
    assert seen == [3, 2]


def test_a_scheduler_that_does_not_answer_is_refused_quickly(tmp_path):
    pytest.importorskip("dask.distributed")
    db = tmp_path / "r.db"
    start = time.monotonic()
    with pytest.raises(ValueError, match="cannot connect to a Dask scheduler within 5 s"):
        sl.sweep.run(VERIFY, db, scheduler="tcp://127.0.0.1:1", progress=False)
    assert time.monotonic() - start < 25               # not Dask's 30 s default
    with pytest.raises(ValueError, match="missing port number"):
        sl.sweep.run(VERIFY, db, scheduler="bogus", progress=False)
    assert not db.exists()


LONG = textwrap.dedent("""
    [sweep]
    function = "train"
    metrics = ["final_test_loss"]
    [fixed]
    arch = [2, 30, 1]
    n_train = 100
    n_test = 10
    steps = 40000
    [grid]
    seed = { range = [0, 12, 1] }
""")


def _driver(spec, db, jobs, cli=False):
    """A sweep driver in a child process (its own session); prints its counts as JSON at the end."""
    if cli:
        code = (f"import sys; from sheaflinalg.cli import main; "
                f"sys.exit(main(['sweep', 'run', {str(spec)!r}, '--db', {str(db)!r}, '--jobs', '{jobs}', "
                f"'--no-progress']))")
    else:
        code = (f"import json, sheaflinalg as sl; "
                f"print(json.dumps(sl.sweep.run({str(spec)!r}, {str(db)!r}, jobs={jobs}, progress=False)))")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _children(pid):
    """Pids of the processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_rows(db, n, child, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.1)
        try:
            if db.exists() and len(sl.sweep.load(db, records=True)) >= n:
                return
        except sl.sweep.StoreError:        # the driver is creating the store
            pass
    raise AssertionError(f"no {n} finished runs in {timeout} s: {child.poll()} {child.stderr.read()}")


@linux_only
def test_pool_workers_exit_when_their_driver_is_killed(tmp_path):
    spec, db = tmp_path / "s.toml", tmp_path / "r.db"
    spec.write_text(LONG)
    driver = _driver(spec, db, 2)
    try:
        _wait_rows(db, 1, driver)
        workers = _children(driver.pid)
        assert len(workers) >= 2, workers
        os.kill(driver.pid, signal.SIGKILL)           # the driver only, not its process group
        driver.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers)
    finally:                                          # nothing of the test left running, whatever happened
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        driver.wait()
    stored = len(sl.sweep.load(db, records=True))
    counts = sl.sweep.run(spec, db, jobs=2, progress=False)      # the dead driver's claims taken back
    assert counts["skipped"] == stored and counts["done"] == 12 - stored and counts["elsewhere"] == 0


def test_ctrl_c_stops_cleanly_and_resumes_exactly(tmp_path):
    spec, db = tmp_path / "s.toml", tmp_path / "r.db"
    spec.write_text(LONG)
    driver = _driver(spec, db, 2, cli=True)
    _wait_rows(db, 1, driver)
    os.killpg(driver.pid, signal.SIGINT)              # as the terminal does: the driver and its workers
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, err
    assert "Traceback" not in err and "run the same command again to resume" in err
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0   # nothing left claimed
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    stored = len(sl.sweep.load(db, records=True))
    counts = sl.sweep.run(spec, db, jobs=2, progress=False)
    assert counts["skipped"] == stored and counts["done"] == 12 - stored
    assert sorted(r["params"]["seed"] for r in sl.sweep.load(db, records=True)) == list(range(12))


def test_two_drivers_on_one_store_compute_each_run_once(tmp_path):
    """Each run claimed before it is computed: the work is shared, never doubled, and the store is whole."""
    spec, db = tmp_path / "s.toml", tmp_path / "r.db"
    spec.write_text(textwrap.dedent("""
        [sweep]
        function = "verify"
        metrics = ["passed"]
        [fixed]
        arch = [2, 20, 1]
        [grid]
        seed = { range = [0, 30, 1] }
    """))
    sl.sweep.run(spec, tmp_path / "warm.db", jobs=1, progress=False)   # everything imported and cached once
    drivers = [_driver(spec, db, jobs) for jobs in (1, 2)]          # one serial, one with a pool
    counts = []
    for d in drivers:
        out, err = d.communicate(timeout=300)
        assert d.returncode == 0, err
        counts.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(c["done"] for c in counts) == 30                        # each run computed once
    assert all(c["done"] + c["skipped"] + c["elsewhere"] == 30 for c in counts)
    rows = sl.sweep.load(db, records=True)
    assert len(rows) == 30 and all(r["status"] == "done" for r in rows)
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    con.close()


def _stubborn(function, params, context=None):
    """A run that misses every Ctrl-C and would take a minute."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(60)
    return {}, {}


def test_an_interrupted_pool_ends_its_workers_instead_of_waiting_for_their_runs(monkeypatch):
    monkeypatch.setattr(execute, "TICK_S", 0.05)
    monkeypatch.setattr(execute.calls, "run", _stubborn)          # the fork workers inherit it
    ticks = []

    def tick():                 # the driver's heartbeat, here the point where the Ctrl-C lands
        ticks.append(time.perf_counter())
        if len(ticks) == 20:
            raise KeyboardInterrupt
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        list(execute.pool("verify", [(0, {}), (1, {})], (), 2, tick=tick))
    assert time.perf_counter() - start < 30                       # not the runs' minute
