"""Running a sweep: the pending runs in this process, in a process pool, or on a Dask cluster.

No scheduler of our own: the standard library's ``ProcessPoolExecutor`` here (one kernel and one BLAS
thread per worker, :func:`sheaflinalg.process_pool`), ``dask.distributed`` there.  Results come back
to this process, which writes each one to the store as soon as it arrives.
"""

import platform
import time
import traceback

from .._common.threads import process_pool
from . import calls


def execute_one(function, params, labels=()):
    """Run one parameter set (``labels`` are recorded, not passed); returns its outcome (never raises
    for a failed run, except Ctrl-C)."""
    started = time.time()
    try:
        metrics, arrays = calls.run(function, {k: v for k, v in params.items() if k not in labels})
        status, error = "done", None
    except Exception as exc:  # a failed run is a result, recorded with its error
        metrics, arrays, status = {}, {}, "failed"
        error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
    finished = time.time()
    return {"status": status, "metrics": metrics, "arrays": arrays, "error": error, "host": platform.node(),
            "started": started, "finished": finished, "seconds": finished - started}


def serial(function, pending, labels):
    """Outcomes ``(index, outcome)`` of the pending runs ``[(index, params)]``, one after another."""
    for i, params in pending:
        yield i, execute_one(function, params, labels)


def pool(function, pending, labels, jobs):
    """The same in ``jobs`` worker processes; outcomes in completion order."""
    from concurrent.futures import as_completed

    with process_pool(jobs) as ex:
        futures = {ex.submit(execute_one, function, params, labels): i for i, params in pending}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def dask(function, pending, labels, client):
    """The same on a Dask cluster (``client``: a ``dask.distributed.Client``)."""
    from dask.distributed import as_completed

    futures = {client.submit(execute_one, function, params, labels, pure=False): i for i, params in pending}
    try:
        for f in as_completed(list(futures)):
            yield futures[f], f.result()
    except BaseException:
        client.cancel(list(futures))
        raise


def connect(scheduler):
    """A ``dask.distributed.Client`` of the scheduler at ``scheduler`` (a clear error without Dask)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs Dask: pip install 'sheaflinalg[dask]'") from None
    try:
        return Client(scheduler, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
