"""The sweep store: one SQLite database (stdlib ``sqlite3``, WAL), one row per finished run.

A row is written only when its run has finished (``status`` ``done`` or ``failed``), in one
transaction, by the process that drives the sweep; workers only compute.  So a sweep killed at any
moment (``kill -9`` included) loses only the runs in flight and leaves no half-written row, and a
rerun skips every ``done`` row by its run identity (a hash of its full parameters, the primary key:
no duplicates; a ``done`` row is never overwritten).  Writers wait for each other (``busy_timeout``).

Before computing a run, a driver *claims* it (table ``claims``: owner, host, pid, heartbeat), in the
same transaction that checks the run is not finished, so two drivers on one store compute each run
once.  A claim is released with the run's row, or when its driver stops; the claim of a driver that
died (its pid gone, on this host; no heartbeat for :data:`STALE_S` seconds, on another) is taken back.  The
heartbeat is refreshed by the driver's own thread (:meth:`Store.beat`, between runs and while it waits
for results): a second thread inside SQLite could hold SQLite's locks at the moment a process pool
forks its workers, and a worker would then deadlock on them.

The store recognises its own files: a database it creates carries :data:`APPLICATION_ID` (``PRAGMA
application_id``) and :data:`SCHEMA_VERSION`; any other database is refused untouched, and the
read-only opening (``readonly=True``: status, load, export, plot) never writes.  SQLite failures
(a damaged file, a lock held past the busy timeout) become one :class:`StoreError` line each.

Large arrays (loss curves, final weights, outputs) go to ``DB.artifacts/RUN_ID.npz`` beside the
database, written atomically before the row that references them.
"""

import contextlib
import functools
import json
import os
import platform
import sqlite3
import time
import urllib.parse
import uuid

import numpy as np

from .._common.atomic import pid_running, prepare_target, save_npz
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
CREATE TABLE IF NOT EXISTS claims (
    run_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL
);
"""
TABLES = {"runs", "sweeps", "claims"}
APPLICATION_ID = 0x53485357      # "SHSW": a sheaflinalg sweep store
SCHEMA_VERSION = 2               # 1: runs and sweeps (no mark); 2: claims
BUSY_MS = 60_000
HEARTBEAT_S = 10.0
STALE_S = 120.0


class StoreError(ValueError):
    """A database that is not a sweep store, is damaged, or stayed locked; the message names the file."""


def _sqlite_errors(method):
    """Turn the SQLite errors of a :class:`Store` method into one :class:`StoreError` line."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(_explain(self.path, exc)) from None
    return wrapper


def _explain(path, exc):
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (f"{path}: the database stayed locked by another process for more than {BUSY_MS // 1000} s "
                f"({text}); let that process finish, or stop it, and run again")
    if "not a database" in text:
        return f"{path}: not a sweep database (not an SQLite file: {text}); give --db a new file"
    if "readonly" in text or "read-only" in text:
        return (f"{path}: cannot write the database ({text}): the file or its directory is read-only; "
                "sweep status, export and plot only read it")
    if "full" in text:
        return f"{path}: the disk is full ({text}); free some space and run again: finished runs are kept"
    if "malformed" in text or "corrupt" in text:
        return f"{path}: the database is damaged ({text}); restore it from a copy, or use a new --db"
    return f"{path}: SQLite error ({text})"


class Store:
    """A sweep database.

    Parameters
    ----------
    path : str or path-like
        The SQLite file (created with its tables when missing, unless ``readonly``).
    readonly : bool
        Open for reading only (the file must exist; nothing is ever written to it).

    Examples
    --------
    >>> import os, tempfile
    >>> st = Store(os.path.join(tempfile.mkdtemp(), "runs.db"))
    >>> st.finished_ids(["abc"])
    set()
    >>> st.close()
    """

    def __init__(self, path, readonly=False):
        self.path, self.readonly = check_path(path, "db"), readonly
        self.owner = f"{platform.node()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.artifacts = self.path + ".artifacts"
        self._claimed = False
        self._last_beat = 0.0
        if not os.path.exists(self.path):
            if readonly:
                raise StoreError(f"{self.path}: no such sweep database")
            prepare_target(self.path, "--db")
        elif os.path.isdir(self.path):
            raise StoreError(f"{self.path}: a directory, not a sweep database")
        if not readonly:
            self._check_artifacts()
        self.db = None
        try:
            self.db = self._connect()
            self._open_when_free()
        except BaseException:
            if self.db is not None:
                self.db.close()
            raise

    def _check_artifacts(self):
        """Refuse, before any run, a place for the runs' arrays that their first write would fail on."""
        where = f"{self.artifacts}: the runs' arrays go to this directory, but"
        if os.path.lexists(self.artifacts) and not os.path.isdir(self.artifacts):
            what = "a link to nowhere" if os.path.islink(self.artifacts) else "a file"
            raise StoreError(f"{where} {what} has its name; move it away")
        if os.path.isdir(self.artifacts) and not os.access(self.artifacts, os.W_OK | os.X_OK):
            raise StoreError(f"{where} it cannot be written; give this user write access or move it away")

    def _connect(self):
        try:
            if self.readonly:
                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                return sqlite3.connect(uri, uri=True, timeout=BUSY_MS / 1000, isolation_level=None)
            return sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(_explain(self.path, exc)) from None

    @_sqlite_errors
    def _open_when_free(self):
        """:meth:`_open`, again while another driver is setting up the same new file.

        SQLite answers "locked" at once, without waiting its busy timeout, where waiting could
        deadlock (two drivers turning one new file to WAL and writing its tables together): the set-up
        only creates what is missing, so it is tried again until the busy timeout has passed.
        """
        deadline = time.monotonic() + BUSY_MS / 1000
        while True:
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                if not ("locked" in str(exc) or "busy" in str(exc)) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _open(self):
        """Recognise the file (refuse any other database untouched), then set it up when writable."""
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        app, version = (self.db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        tables = self.tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app == APPLICATION_ID:
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path}: a sweep store of a newer sheaflinalg (schema {version}); "
                                 "upgrade sheaflinalg to open it")
        elif app == 0 and not tables and self.readonly:
            raise StoreError(f"{self.path}: an empty database: no sweep has been run into it (yet)")
        elif app != 0 or not (tables == set() or self._legacy(tables)):
            what = f"application id {app:#x}" if app else (f"tables {', '.join(sorted(tables))}" if tables
                                                           else "no tables")
            raise StoreError(f"{self.path}: not a sweep database ({what}); sheaflinalg reads and writes only "
                             "the stores it created: give --db a new file")
        if not self.readonly:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            with self._transaction():
                for statement in SCHEMA.split(";"):
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.tables = set(TABLES)

    def _legacy(self, tables):
        """A store of an earlier version (no mark): exactly its tables, with the columns of runs."""
        if not tables or not tables <= TABLES or not {"runs", "sweeps"} <= tables:
            return False
        need = {"run_id", "sweep", "function", "params", "status", "metrics"}
        return need <= {row[1] for row in self.db.execute("PRAGMA table_info(runs)")}

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self):
        """Release the claims of this driver (if it claimed any) and close."""
        if self.db is None:
            return
        try:
            if self._claimed:               # this driver claimed runs: release those not finished
                self.release()
        finally:
            self.db.close()
            self.db = None

    def _columns(self):
        return {row[1].lower() for row in self.db.execute("PRAGMA table_info(runs)")}

    @_sqlite_errors
    def register(self, spec):
        """Record the sweep's specification, and one indexed column ``p_NAME`` per axis.

        A name already registered with other runs, function or metrics is refused (so that
        :meth:`rows` of a sweep and :func:`sheaflinalg.sweep.status` always describe the same runs).
        """
        ids = spec.run_ids()
        with self._transaction():
            old = self.db.execute("SELECT function, metrics, run_ids FROM sweeps WHERE name = ?",
                                  (spec.name,)).fetchone()
            if old is not None and (old[0] != spec.function or sorted(json.loads(old[1])) != sorted(spec.metrics)
                                    or sorted(json.loads(old[2])) != sorted(ids)):
                raise StoreError(
                    f"{self.path}: a sweep named {spec.name!r} with another specification ({len(json.loads(old[2]))} "
                    f"runs of {old[0]}) is stored here; give this one its own name (name = \"...\" in [sweep]; a "
                    "survey's --name) or another --db")
            have = self._columns()
            for axis in spec.axes:
                col = f"p_{axis}"
                if col.lower() not in have:    # axis names are checked identifiers (sweep.spec.NAME)
                    self.db.execute(f'ALTER TABLE runs ADD COLUMN "{col}"')
                    self.db.execute(f'CREATE INDEX IF NOT EXISTS "idx_{col}" ON runs ("{col}")')
            self.db.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                            "spec = excluded.spec, axes = excluded.axes, run_ids = excluded.run_ids, "
                            "updated = excluded.updated",
                            (spec.name, spec.function, spec.text, json.dumps(spec.axes), json.dumps(spec.metrics),
                             json.dumps(ids), time.time()))

    @_sqlite_errors
    def finished_ids(self, ids, status=("done",)):
        """The run identities among ``ids`` whose rows have one of ``status``."""
        marks = ",".join("?" * len(status))
        rows = self.db.execute(f"SELECT run_id FROM runs WHERE status IN ({marks})", tuple(status))
        wanted = set(ids)
        return {r[0] for r in rows if r[0] in wanted}

    @_sqlite_errors
    def claim(self, rid, retry_failed=False):
        """Claim run ``rid`` for this driver: ``"claimed"``, ``"finished"`` (a row says it is done, or
        failed without ``retry_failed``) or ``"busy"`` (a live driver holds it)."""
        with self._transaction():
            row = self.db.execute("SELECT status FROM runs WHERE run_id = ?", (rid,)).fetchone()
            if row is not None and (row[0] == "done" or not retry_failed):
                return "finished"
            held = self.db.execute("SELECT owner, host, pid, heartbeat FROM claims WHERE run_id = ?",
                                   (rid,)).fetchone()
            if held is not None and held[0] != self.owner and _alive(*held[1:]):
                return "busy"
            self.db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                            (rid, self.owner, platform.node(), os.getpid(), time.time()))
        self._claimed = True
        self.beat()
        return "claimed"

    @_sqlite_errors
    def beat(self):
        """Refresh the heartbeat of this driver's claims (at most every :data:`HEARTBEAT_S` seconds)."""
        now = time.time()
        if self._claimed and now - self._last_beat >= HEARTBEAT_S:
            self.db.execute("UPDATE claims SET heartbeat = ? WHERE owner = ?", (now, self.owner))
            self._last_beat = now

    @_sqlite_errors
    def running_ids(self, ids):
        """The run identities among ``ids`` claimed by a live driver (this one included)."""
        if "claims" not in self.tables:        # a store of an earlier version, opened read-only
            return set()
        wanted = set(ids)
        return {r[0] for r in self.db.execute("SELECT run_id, host, pid, heartbeat FROM claims")
                if r[0] in wanted and _alive(*r[1:])}

    @_sqlite_errors
    def release(self):
        """Drop this driver's claims (the runs it did not finish become pending again)."""
        with self._transaction():
            self.db.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))

    @_sqlite_errors
    def write(self, spec, rid, params, outcome):
        """Write one finished run (``outcome``: dict with status, metrics, error, arrays, times) and
        release its claim."""
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
        with self._transaction():
            self.db.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                            f"ON CONFLICT(run_id) DO UPDATE SET {update} WHERE runs.status = 'failed'", values)
            self.db.execute("DELETE FROM claims WHERE run_id = ? AND owner = ?", (rid, self.owner))

    @_sqlite_errors
    def rows(self, sweep=None):
        """Every run (of the sweep named ``sweep``: the runs it registered) as a dict: parameters,
        metrics, status, error, timings."""
        wanted = None
        if sweep is not None:
            found = {s["name"]: s for s in self.sweeps()}
            if sweep not in found:
                close = [n for n in found if n.lower() == str(sweep).lower()] or sorted(found)
                raise StoreError(f"{self.path}: no sweep named {sweep!r}; it holds {', '.join(map(repr, close))}"
                                 if close else f"{self.path}: no sweep named {sweep!r}; it holds none")
            wanted = set(found[sweep]["run_ids"])
        query = "SELECT run_id, sweep, params, status, metrics, error, seconds, artifacts FROM runs ORDER BY rowid"
        out = []
        for rid, name, params, status, metrics, error, seconds, artifacts in self.db.execute(query):
            if wanted is None or rid in wanted:
                out.append({"run_id": rid, "sweep": name, "params": json.loads(params), "status": status,
                            "metrics": json.loads(metrics) if metrics else {}, "error": error,
                            "seconds": seconds, "artifacts": artifacts})
        return out

    @_sqlite_errors
    def sweeps(self):
        """``[{name, function, axes, metrics, run_ids}]`` of the sweeps registered here."""
        return [{"name": n, "function": f, "axes": json.loads(a), "metrics": json.loads(m), "run_ids": json.loads(r)}
                for n, f, a, m, r in self.db.execute("SELECT name, function, axes, metrics, run_ids FROM sweeps")]


def _alive(host, pid, heartbeat):
    """Whether the driver of a claim still runs: its pid on this host (exact, whatever the length of
    its runs), a heartbeat younger than :data:`STALE_S` seconds for a driver on another host."""
    if host == platform.node():
        return pid_running(pid)
    return time.time() - heartbeat <= STALE_S


def _sql(value):
    """A parameter as an SQL value for its indexed column (lists as JSON text)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, np.generic):
        return value.item()
    return value
