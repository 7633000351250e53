"""Scripted parameter sweeps: TOML specifications, an SQLite store, kill-safe resume, a process pool
here and Dask on a cluster (``sl.sweep.run``, ``sl.sweep.load``; ``sheaflinalg sweep``).

Modules: ``spec`` (check and expand a specification), ``expr`` (safe arithmetic of derived values),
``calls`` (how a run becomes a call, its metrics), ``store`` (SQLite), ``execute`` (executors).
May import every layer below it (tasks, dynamics, training, spectral, sheaf, network, ``_common``).
"""

import csv
import io
import json
import os

from .._common.atomic import write_text
from .._common.progress import progress_bar
from .._common.threads import pool_workers
from .._common.validation import check_path
from . import execute
from .spec import Spec, SpecError, load as load_spec
from .store import Store, StoreError

__all__ = ["run", "load", "status", "export_csv", "flatten", "Spec", "SpecError", "Store", "StoreError"]


def run(spec, db, jobs=None, client=None, scheduler=None, retry_failed=False, progress=True):
    """Run every run of ``spec`` not yet done in the database ``db``.

    Each run is claimed in the store before it is computed, so two drivers on one store compute each
    run once; Ctrl-C (or any error) releases this driver's claims, and running the same sweep again
    resumes exactly: finished runs are kept, the others run.

    Parameters
    ----------
    spec : str, path-like or dict
        A TOML file, a TOML string or the parsed dict (see :mod:`sheaflinalg.sweep.spec`).
    db : str or path-like
        The SQLite store (created when missing; a database this package did not create is refused).
    jobs : int, optional
        Worker processes (default: the cores this process may use); never more than the pending runs
        or the cores available; 1 runs here.
    client : dask.distributed.Client, optional
        Run on this Dask cluster instead (``scheduler``: connect to this address, within a few seconds).
    retry_failed : bool
        Run again the runs that failed before (by default they are kept as they are).
    progress : bool

    Returns
    -------
    dict
        Counts of this call: ``planned``, ``done`` and ``failed`` (computed now), ``skipped`` (finished
        before, here or by another driver), ``elsewhere`` (being computed by another live driver).

    Examples
    --------
    >>> import os, tempfile, sheaflinalg as sl
    >>> spec = {"sweep": {"function": "verify", "metrics": ["passed"]},
    ...         "fixed": {"arch": [2, 5, 1], "n_inputs": 3}, "grid": {"seed": [0, 1]}}
    >>> db = os.path.join(tempfile.mkdtemp(), "runs.db")
    >>> sl.sweep.run(spec, db, jobs=1, progress=False)
    {'planned': 2, 'done': 2, 'failed': 0, 'skipped': 0, 'elsewhere': 0}
    >>> [r["metrics"]["passed"] for r in sl.sweep.load(db, records=True)]
    [True, True]
    """
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    check_path(db, "db")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if client is not None and not callable(getattr(client, "submit", None)):
        raise TypeError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
    if not isinstance(retry_failed, bool):
        raise TypeError(f"retry_failed must be True or False, got {type(retry_failed).__name__}")
    own_client = scheduler is not None and client is None
    if own_client:              # before the store: a bad address writes nothing
        client = execute.connect(scheduler)
    try:
        return _run(spec, db, jobs, client, retry_failed, progress)
    finally:
        if own_client:
            client.close()


def _run(spec, db, jobs, client, retry_failed, progress):
    """The body of :func:`run`: register, claim and compute the pending runs, write each outcome."""
    store = Store(db)
    try:
        store.register(spec)
        ids = spec.run_ids()
        keep = store.finished_ids(ids, ("done",) if retry_failed else ("done", "failed"))
        pending = [(i, p) for i, (rid, p) in enumerate(zip(ids, spec.runs)) if rid not in keep]
        counts = {"planned": len(ids), "done": 0, "failed": 0, "skipped": len(ids) - len(pending), "elsewhere": 0}
        claimed = _claimed(store, ids, pending, retry_failed, counts)
        workers = pool_workers(jobs, len(pending))
        if client is not None:
            outcomes = execute.dask(spec.function, claimed, spec.labels, client, tick=store.beat)
        elif workers <= 1:
            outcomes = execute.serial(spec.function, claimed, spec.labels)
        else:
            outcomes = execute.pool(spec.function, claimed, spec.labels, workers, tick=store.beat)
        with progress_bar(len(pending), progress and len(pending) > 1, f"sweep {spec.name}", unit="run") as bar:
            for i, outcome in outcomes:
                store.write(spec, ids[i], spec.runs[i], outcome)
                counts[outcome["status"]] += 1
                bar.update(1)
                bar.set_postfix(done=counts["done"], failed=counts["failed"], refresh=False)
        return counts
    finally:
        store.close()           # releases the claims of runs not finished (Ctrl-C): they stay pending


def _claimed(store, ids, pending, retry_failed, counts):
    """The pending runs this driver claims, one at a time as the executor asks for them."""
    for i, params in pending:
        state = store.claim(ids[i], retry_failed)
        if state == "claimed":
            yield i, params
        else:
            counts["skipped" if state == "finished" else "elsewhere"] += 1


def load(db, sweep=None, records=False):
    """The runs of ``db`` (of the sweep named ``sweep``): a pandas DataFrame (one column per parameter
    and metric, ``status``, ``run_id``) when pandas is installed and ``records`` is False, else a list of
    dicts.  The store is opened read-only."""
    db = check_path(db, "db")
    rows = _read(db, lambda store: store.rows(sweep))
    if records:
        return rows
    flat = flatten(rows)
    try:
        import pandas as pd
    except ImportError:
        return flat
    return pd.DataFrame(flat)


def flatten(rows):
    """One dict per run: its parameters, its metrics (``NAME (metric)`` when a parameter has that name),
    ``status`` and ``run_id`` (names a specification may not use, :data:`spec.RESERVED`).

    Examples
    --------
    >>> flatten([{"params": {"steps": 10}, "metrics": {"steps": 7}, "status": "done", "run_id": "ab"}])
    [{'steps': 10, 'steps (metric)': 7, 'status': 'done', 'run_id': 'ab'}]
    """
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"params", "metrics"} <= set(r) for r in rows):
        raise TypeError(f"rows must be the list of dicts of load(db, records=True), got {type(rows).__name__}")
    return [dict(r["params"], **{_metric_column(k, r["params"]): v for k, v in r["metrics"].items()},
                 status=r["status"], run_id=r["run_id"]) for r in rows]


def status(db):
    """``[{name, function, planned, done, failed, running, remaining}]`` per sweep of ``db`` (read-only):
    the counts of the runs each sweep registered, which :func:`load` of that sweep returns."""
    db = check_path(db, "db")

    def count(store):
        out = []
        for s in store.sweeps():
            done = store.finished_ids(s["run_ids"], ("done",))
            failed = store.finished_ids(s["run_ids"], ("failed",))
            running = store.running_ids(s["run_ids"]) - done - failed
            out.append({"name": s["name"], "function": s["function"], "planned": len(s["run_ids"]),
                        "done": len(done), "failed": len(failed), "running": len(running),
                        "remaining": len(s["run_ids"]) - len(done) - len(failed)})
        return out
    return _read(db, count)


def _read(db, what):
    """``what(store)`` with ``db`` opened read-only (it must exist; nothing is written to it)."""
    store = Store(db, readonly=True)
    try:
        return what(store)
    finally:
        store.close()


def export_csv(db, path, sweep=None):
    """Write one CSV row per run: every parameter (fixed, axes, derived), every metric, ``status``."""
    check_path(db, "db")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file name (str or path-like), got {type(path).__name__}")
    if os.path.exists(db) and os.path.exists(path) and os.path.samefile(db, path):
        raise ValueError(f"--csv {path} is the database itself; name another file")
    rows = load(db, sweep, records=True)
    params, metrics = [], []
    for r in rows:
        params += [k for k in r["params"] if k not in params]
        metrics += [k for k in r["metrics"] if k not in metrics]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(params + [_metric_column(m, params) for m in metrics] + ["status"])
    for r in rows:
        w.writerow([_cell(r["params"].get(k)) for k in params] + [_cell(r["metrics"].get(k)) for k in metrics]
                   + [r["status"]])
    write_text(path, buf.getvalue(), "--csv")
    return len(rows)


def _metric_column(name, params):
    """A metric's column: its name, or ``NAME (metric)`` when a parameter has that name (``steps``)."""
    return f"{name} (metric)" if name in params else name


def _cell(value):
    """A CSV cell: text as it is, every other value as JSON (so ``json.loads`` reads it back exactly)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)
