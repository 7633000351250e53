"""The sweep store: one SQLite database (stdlib ``sqlite3``, WAL), one row per finished run.

A row is written only when its run has finished (``status`` ``done`` or ``failed``), in one
transaction, by the process that drives the sweep; workers only compute.  So a sweep killed at any
moment (``kill -9`` included) loses only the runs in flight and leaves no half-written row, and a
rerun skips every ``done`` row by its run identity (a hash of its full parameters, the primary key:
no duplicates, even when two sweeps write one database at once; a ``done`` row is never overwritten).
Writers wait for each other (``busy_timeout``) instead of failing with "database is locked".

Large arrays (loss curves, final weights, outputs) go to ``DB.artifacts/RUN_ID.npz`` beside the
database, written atomically before the row that references them.
"""

import json
import os
import platform
import sqlite3
import time

import numpy as np

from .._common.atomic import prepare_target, save_npz
from .._common.validation import check_path
from .._common.version import VERSION

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    sweep TEXT NOT NULL,
    function TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    metrics TEXT,
    seed INTEGER,
    version TEXT,
    host TEXT,
    started REAL,
    finished REAL,
    seconds REAL,
    error TEXT,
    artifacts TEXT
);
CREATE TABLE IF NOT EXISTS sweeps (
    name TEXT PRIMARY KEY,
    function TEXT NOT NULL,
    spec TEXT NOT NULL,
    axes TEXT NOT NULL,
    metrics TEXT NOT NULL,
    run_ids TEXT NOT NULL,
    updated REAL
);
"""
BUSY_MS = 60_000


class Store:
    """A sweep database.

    Parameters
    ----------
    path : str or path-like
        The SQLite file (created with its tables when missing).

    Examples
    --------
    >>> import os, tempfile
    >>> st = Store(os.path.join(tempfile.mkdtemp(), "runs.db"))
    >>> st.finished_ids(["abc"])
    set()
    """

    def __init__(self, path):
        self.path = check_path(path, "db")
        if not os.path.exists(self.path):
            prepare_target(self.path, "--db")
        try:
            self.db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.executescript(SCHEMA)
            missing = {"run_id", "sweep", "function", "params", "status", "metrics"} - self._columns()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: not a sweep database ({exc})") from None
        if missing:
            self.db.close()
            raise ValueError(f"{self.path}: not a sweep database (its table runs has no {sorted(missing)})")
        self.artifacts = self.path + ".artifacts"

    def close(self):
        self.db.close()

    def _columns(self):
        return {row[1] for row in self.db.execute("PRAGMA table_info(runs)")}

    def register(self, spec):
        """Record the sweep's specification, and one indexed column ``p_NAME`` per axis."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            have = self._columns()
            for axis in spec.axes:
                col = f"p_{axis}"
                if col not in have:       # axis names are checked identifiers (sweep.spec.NAME)
                    self.db.execute(f'ALTER TABLE runs ADD COLUMN "{col}"')
                    self.db.execute(f'CREATE INDEX IF NOT EXISTS "idx_{col}" ON runs ("{col}")')
            self.db.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                            "function = excluded.function, spec = excluded.spec, axes = excluded.axes, "
                            "metrics = excluded.metrics, run_ids = excluded.run_ids, updated = excluded.updated",
                            (spec.name, spec.function, spec.text, json.dumps(spec.axes), json.dumps(spec.metrics),
                             json.dumps(spec.run_ids()), time.time()))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def finished_ids(self, ids, status=("done",)):
        """The run identities among ``ids`` whose rows have one of ``status``."""
        marks = ",".join("?" * len(status))
        rows = self.db.execute(f"SELECT run_id FROM runs WHERE status IN ({marks})", tuple(status))
        wanted = set(ids)
        return {r[0] for r in rows if r[0] in wanted}

    def write(self, spec, rid, params, outcome):
        """Write one finished run (``outcome``: dict with status, metrics, error, arrays, times)."""
        artifacts = None
        if outcome.get("arrays"):
            os.makedirs(self.artifacts, exist_ok=True)
            artifacts = os.path.join(os.path.basename(self.artifacts), f"{rid}.npz")
            save_npz(os.path.join(self.artifacts, f"{rid}.npz"), outcome["arrays"])
        cols = ["run_id", "sweep", "function", "params", "status", "metrics", "seed", "version", "host",
                "started", "finished", "seconds", "error", "artifacts"] + [f'"p_{a}"' for a in spec.axes]
        values = [rid, spec.name, spec.function, json.dumps(params, sort_keys=True), outcome["status"],
                  json.dumps({m: outcome.get("metrics", {}).get(m) for m in spec.metrics}), params.get("seed"), VERSION,
                  outcome.get("host", platform.node()), outcome.get("started"), outcome.get("finished"),
                  outcome.get("seconds"), outcome.get("error"), artifacts] + [_sql(params.get(a)) for a in spec.axes]
        update = ", ".join(f"{c} = excluded.{c}" for c in cols[1:])
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                            f"ON CONFLICT(run_id) DO UPDATE SET {update} WHERE runs.status = 'failed'", values)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def rows(self, sweep=None):
        """Every run (of ``sweep``) as a dict: parameters, metrics, status, error, timings."""
        query = "SELECT run_id, sweep, params, status, metrics, error, seconds, artifacts FROM runs"
        args = ()
        if sweep is not None:
            query, args = query + " WHERE sweep = ?", (sweep,)
        out = []
        for rid, name, params, status, metrics, error, seconds, artifacts in self.db.execute(query + " ORDER BY rowid", args):
            out.append({"run_id": rid, "sweep": name, "params": json.loads(params), "status": status,
                        "metrics": json.loads(metrics) if metrics else {}, "error": error, "seconds": seconds,
                        "artifacts": artifacts})
        return out

    def sweeps(self):
        """``[{name, function, axes, metrics, run_ids}]`` of the sweeps registered here."""
        return [{"name": n, "function": f, "axes": json.loads(a), "metrics": json.loads(m), "run_ids": json.loads(r)}
                for n, f, a, m, r in self.db.execute("SELECT name, function, axes, metrics, run_ids FROM sweeps")]


def _sql(value):
    """A parameter as an SQL value for its indexed column (lists as JSON text)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, np.generic):
        return value.item()
    return value
