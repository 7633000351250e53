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
from .._common.validation import check_path
from .drive import drive
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
    return drive(spec, db, jobs, client, scheduler, retry_failed, progress)


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
