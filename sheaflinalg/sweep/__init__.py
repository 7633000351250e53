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
from .._common.threads import get_num_threads
from .._common.validation import check_path
from . import execute
from .spec import Spec, SpecError, load as load_spec
from .store import Store

__all__ = ["run", "load", "status", "export_csv", "Spec", "SpecError", "Store"]


def run(spec, db, jobs=None, client=None, scheduler=None, retry_failed=False, progress=True):
    """Run every run of ``spec`` not yet done in the database ``db``.

    Parameters
    ----------
    spec : str, path-like or dict
        A TOML file, a TOML string or the parsed dict (see :mod:`sheaflinalg.sweep.spec`).
    db : str or path-like
        The SQLite store (created when missing).
    jobs : int, optional
        Worker processes (default: the cores this process may use); 1 runs here.
    client : dask.distributed.Client, optional
        Run on this Dask cluster instead (``scheduler``: connect to this address).
    retry_failed : bool
        Run again the runs that failed before (by default they are kept as they are).
    progress : bool

    Returns
    -------
    dict
        ``{"planned", "done", "failed", "skipped"}`` counts of this call.

    Examples
    --------
    >>> import os, tempfile, sheaflinalg as sl
    >>> spec = {"sweep": {"function": "verify", "metrics": ["passed"]},
    ...         "fixed": {"arch": [2, 5, 1], "n_inputs": 3}, "grid": {"seed": [0, 1]}}
    >>> db = os.path.join(tempfile.mkdtemp(), "runs.db")
    >>> sl.sweep.run(spec, db, jobs=1, progress=False)
    {'planned': 2, 'done': 2, 'failed': 0, 'skipped': 0}
    >>> [r["metrics"]["passed"] for r in sl.sweep.load(db, records=True)]
    [True, True]
    """
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    store = Store(db)
    try:
        store.register(spec)
        ids = spec.run_ids()
        keep = store.finished_ids(ids, ("done",) if retry_failed else ("done", "failed"))
        pending = [(i, p) for i, (rid, p) in enumerate(zip(ids, spec.runs)) if rid not in keep]
        counts = {"planned": len(ids), "done": 0, "failed": 0, "skipped": len(ids) - len(pending)}
        if scheduler is not None and client is None:
            client = execute.connect(scheduler)
        jobs = jobs or get_num_threads()
        if client is not None:
            outcomes = execute.dask(spec.function, pending, spec.labels, client)
        elif jobs == 1 or len(pending) <= 1:
            outcomes = execute.serial(spec.function, pending, spec.labels)
        else:
            outcomes = execute.pool(spec.function, pending, spec.labels, min(jobs, len(pending)))
        with progress_bar(len(pending), progress and len(pending) > 1, f"sweep {spec.name}", unit="run") as bar:
            for i, outcome in outcomes:
                store.write(spec, ids[i], spec.runs[i], outcome)
                counts[outcome["status"]] += 1
                bar.update(1)
                bar.set_postfix(done=counts["done"], failed=counts["failed"], refresh=False)
        return counts
    finally:
        store.close()


def load(db, sweep=None, records=False):
    """The runs of ``db`` (of ``sweep``): a pandas DataFrame (one column per parameter and metric,
    ``status``) when pandas is installed and ``records`` is False, else a list of dicts."""
    db = check_path(db, "db")
    if not os.path.exists(db):
        raise ValueError(f"{db}: no such sweep database")
    store = Store(db)
    try:
        rows = store.rows(sweep)
    finally:
        store.close()
    if records:
        return rows
    flat = [dict(r["params"], **{_metric_column(k, r["params"]): v for k, v in r["metrics"].items()},
                 status=r["status"], run_id=r["run_id"]) for r in rows]
    try:
        import pandas as pd
    except ImportError:
        return flat
    return pd.DataFrame(flat)


def status(db):
    """``[{name, function, planned, done, failed, remaining}]`` per sweep of ``db``."""
    db = check_path(db, "db")
    if not os.path.exists(db):
        raise ValueError(f"{db}: no such sweep database")
    store = Store(db)
    try:
        out = []
        for s in store.sweeps():
            done = store.finished_ids(s["run_ids"], ("done",))
            failed = store.finished_ids(s["run_ids"], ("failed",))
            out.append({"name": s["name"], "function": s["function"], "planned": len(s["run_ids"]),
                        "done": len(done), "failed": len(failed),
                        "remaining": len(s["run_ids"]) - len(done) - len(failed)})
        return out
    finally:
        store.close()


def export_csv(db, path, sweep=None):
    """Write one CSV row per run: every parameter (fixed, axes, derived), every metric, ``status``."""
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
