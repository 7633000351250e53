"""Driving a sweep: register it in the store, claim each pending run, compute it with an executor and
write its outcome as soon as it arrives (shared by :func:`sheaflinalg.sweep.run` and
:func:`sheaflinalg.survey`)."""

from .._common.progress import progress_bar
from .._common.threads import pool_workers
from .._common.validation import check_path
from . import execute
from .store import Store


def drive(spec, db, jobs=None, client=None, scheduler=None, retry_failed=False, progress=True, context=None):
    """Run every run of the checked :class:`~sheaflinalg.sweep.spec.Spec` ``spec`` not yet done in ``db``.

    The arguments are those of :func:`sheaflinalg.sweep.run`, checked here; ``context`` (optional) is
    an object whose ``run(params) -> (metrics, arrays)`` computes each run instead of the call that
    ``spec.function`` names (a survey's network and inputs: :class:`sheaflinalg.sweep.survey.SurveyTask`),
    sent to the workers with the runs.  Returns the counts of :func:`sheaflinalg.sweep.run`.
    """
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
        return _run(spec, db, jobs, client, retry_failed, progress, context)
    finally:
        if own_client:
            client.close()


def _run(spec, db, jobs, client, retry_failed, progress, context):
    """The body of :func:`drive`: register, claim and compute the pending runs, write each outcome."""
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
            outcomes = execute.dask(spec.function, claimed, spec.labels, client, tick=store.beat, context=context)
        elif workers <= 1:
            outcomes = execute.serial(spec.function, claimed, spec.labels, context=context)
        else:
            outcomes = execute.pool(spec.function, claimed, spec.labels, workers, tick=store.beat, context=context)
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
