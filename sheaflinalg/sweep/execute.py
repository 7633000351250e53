"""Running a sweep: the pending runs in this process, in a process pool, or on a Dask cluster.

No scheduler of our own: the standard library's ``ProcessPoolExecutor`` here (one kernel and one BLAS
thread per worker, :func:`sheaflinalg.process_pool`; a worker exits when its parent is gone),
``dask.distributed`` there.  Each executor takes the runs as an iterator and keeps only a few in
flight, so the driver claims a run in the store just before it is submitted (two drivers on one store
share the runs); results come back to this process, which writes each one as soon as it arrives.
"""

import itertools
import platform
import time
import traceback

from .._common.threads import process_pool
from . import calls

CONNECT_S = 5
TICK_S = 10.0       # while waiting for results, the driver calls ``tick`` (its heartbeat) this often


def execute_one(function, params, labels=(), context=None):
    """Run one parameter set (``labels`` are recorded, not passed; ``context``: see :func:`calls.run`);
    returns its outcome (never raises for a failed run, except Ctrl-C)."""
    started = time.time()
    try:
        metrics, arrays = calls.run(function, {k: v for k, v in params.items() if k not in labels}, context)
        status, error = "done", None
    except Exception as exc:  # a failed run is a result, recorded with its error
        metrics, arrays, status = {}, {}, "failed"
        error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
    finished = time.time()
    return {"status": status, "metrics": metrics, "arrays": arrays, "error": error, "host": platform.node(),
            "started": started, "finished": finished, "seconds": finished - started}


def serial(function, runs, labels, tick=None, context=None):
    """Outcomes ``(index, outcome)`` of the runs ``[(index, params)]`` (any iterable), one after another
    (``tick``: unused here, the runs run in the caller's thread; ``context``: see :func:`calls.run`)."""
    for i, params in runs:
        yield i, execute_one(function, params, labels, context)


def pool(function, runs, labels, jobs, tick=None, context=None):
    """The same in ``jobs`` worker processes, at most ``jobs`` runs in flight; outcomes in completion order.
    ``tick()`` is called every :data:`TICK_S` seconds while waiting."""
    from concurrent.futures import FIRST_COMPLETED, wait

    ex = process_pool(jobs)
    try:
        yield from _stream(lambda params: ex.submit(execute_one, function, params, labels, context),
                           lambda fs: wait(fs, timeout=TICK_S, return_when=FIRST_COMPLETED).done,
                           lambda fs: [f.cancel() for f in fs], runs, jobs, tick)
    except BaseException:
        _stop(ex)
        raise
    ex.shutdown(wait=True)


def _stop(ex):
    """Shut the pool ``ex`` down without waiting for its running tasks, whose workers are ended: after a Ctrl-C
    (or an abandoned stream) a worker that missed the interrupt (it landed in a finaliser, or while the worker
    started) would otherwise keep its run going, and the driver would wait for it."""
    workers = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(timeout=10)


def dask(function, runs, labels, client, tick=None, context=None):
    """The same on a Dask cluster (``client``: a ``dask.distributed.Client``), two runs in flight per
    worker thread; a ``context`` is sent to every worker once (``Client.scatter``), not with each run."""
    from dask.distributed import wait

    def wait_any(fs):
        try:
            return wait(fs, timeout=TICK_S, return_when="FIRST_COMPLETED").done
        except TimeoutError:        # dask raises where concurrent.futures returns nothing done
            return set()

    limit = max(1, 2 * sum(client.nthreads().values()))
    if context is not None:
        context = client.scatter(context, broadcast=True)
    yield from _stream(lambda params: client.submit(execute_one, function, params, labels, context, pure=False),
                       wait_any, client.cancel, runs, limit, tick)


def _stream(submit, wait_any, cancel, runs, limit, tick=None):
    """``(index, outcome)`` of ``runs`` submitted with ``submit``, at most ``limit`` in flight: the next
    run is taken from the iterator only when a slot frees (after the caller handled an outcome);
    ``tick()`` after each wait (``wait_any`` returns after at most :data:`TICK_S` seconds)."""
    runs, running = iter(runs), {}

    def top_up():
        for i, params in itertools.islice(runs, limit - len(running)):
            running[submit(params)] = i

    try:
        top_up()
        while running:
            for f in wait_any(list(running)):
                yield running.pop(f), f.result()
            if tick is not None:
                tick()
            top_up()
    except BaseException:
        cancel(list(running))
        raise


def connect(scheduler):
    """A ``dask.distributed.Client`` of the scheduler at ``scheduler``, within :data:`CONNECT_S` seconds
    (a clear error without Dask, for a malformed address, or when nothing answers)."""
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"--scheduler must be an address like tcp://HOST:8786, got {scheduler!r}")
    try:
        from dask.distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs Dask: pip install 'sheaflinalg[dask]'") from None
    try:
        return Client(scheduler, timeout=CONNECT_S)
    except Exception as exc:  # noqa: BLE001 - whatever Dask raises, the address gave no scheduler
        raise ValueError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler within {CONNECT_S} s "
                         f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); check the address "
                         "(tcp://HOST:PORT) and that the scheduler runs") from None
