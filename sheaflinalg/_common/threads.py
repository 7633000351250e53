"""How many threads the package uses: one policy, BLAS limits, process-pool workers.

The default is the number of cores this process may run on
(``os.sched_getaffinity``), lowered by ``NUMBA_NUM_THREADS`` and by the
package's own ``SHEAFLINALG_NUM_THREADS``; :func:`set_num_threads` changes it
for the process and :func:`num_threads` for a block of code in the calling
thread.  Results never depend on the thread count: every parallel part of the
package splits its work into a fixed number of blocks and reduces them in a
fixed order, so threads only change who computes which block.
"""

import collections
import contextlib
import os
import signal
import statistics
import threading

from .parent import exit_with_parent
from .validation import check_int

ENV_VAR = "SHEAFLINALG_NUM_THREADS"
_CONTROLLER = None
_setting = None                 # set_num_threads(); None: the environment's default
_local = threading.local()      # num_threads() overrides, per calling thread
# GNU OpenMP cannot start threads in a child forked from a process whose
# OpenMP threads already ran (numba then kills the child): such a child runs
# the serial kernels, which give the same results.
_parallel_forbidden = False


def _positive_int(value, name):
    """``value`` as an int >= 1 (TypeError for non-integers, ValueError below 1: the package's rule)."""
    return check_int(value, name, 1)


def available_cores():
    """Cores this process may run on (its CPU affinity; ``os.cpu_count()`` where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _env_limit(name):
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {name} must be a positive integer, got {text!r}") from None
    return _positive_int(value, f"environment variable {name}")


def default_num_threads():
    """The environment's default: available cores, lowered by ``NUMBA_NUM_THREADS`` and ``SHEAFLINALG_NUM_THREADS``."""
    n = available_cores()
    for name in ("NUMBA_NUM_THREADS", ENV_VAR):
        limit = _env_limit(name)
        if limit is not None:
            n = min(n, limit)
    return n


def get_num_threads():
    """Threads the package uses now (the innermost :func:`num_threads`, else :func:`set_num_threads`, else the default).

    Examples
    --------
    >>> with num_threads(3):
    ...     get_num_threads()
    3
    """
    override = getattr(_local, "value", None)
    if override is not None:
        return override
    return _setting if _setting is not None else default_num_threads()


def set_num_threads(n):
    """Use ``n`` threads from now on in this process (``None``: back to the environment's default).

    Any positive integer is accepted, also more than the cores; the results
    do not depend on it.
    """
    global _setting
    _setting = None if n is None else _positive_int(n, "n")


def num_threads(n):
    """Context manager: use ``n`` threads in the calling thread inside the ``with`` block.

    ``n`` is checked when it is called, not when the block is entered.
    """
    return _num_threads(_positive_int(n, "n"))


@contextlib.contextmanager
def _num_threads(n):
    previous = getattr(_local, "value", None)
    _local.value = n
    try:
        yield n
    finally:
        _local.value = previous


def resolve_threads(threads, name="threads"):
    """The thread count of a ``threads=`` argument: ``None`` -> :func:`get_num_threads`, else a positive integer."""
    return get_num_threads() if threads is None else _positive_int(threads, name)


def parallel_allowed():
    """False in a child forked after GNU OpenMP threads ran (the kernels then run serially)."""
    return not _parallel_forbidden


def _after_fork_in_child():
    global _parallel_forbidden
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran before the fork
        return
    _parallel_forbidden = layer == "omp"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _controller():
    """One cached ``threadpoolctl.ThreadpoolController`` (building one inspects every loaded library)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = ThreadpoolController()
        except ImportError:  # pragma: no cover - threadpoolctl is a dependency
            _CONTROLLER = False
    return _CONTROLLER


def check_blas_threads(threads, name="blas_threads"):
    """``threads`` if it is None or a positive integer, else ValueError naming ``name``."""
    return None if threads is None else _positive_int(threads, name)


def blas_limit(threads):
    """Context manager limiting BLAS to ``threads`` threads (``None``: leave BLAS as it is).

    Threaded BLAS gains nothing on the small products and eigensolves of this
    package, and its idle threads spin on the cores the compiled kernels need.

    Examples
    --------
    >>> import numpy as np
    >>> with blas_limit(1):
    ...     float(np.ones((3, 3)) @ np.ones(3) @ np.ones(3))
    9.0
    """
    threads = check_blas_threads(threads)
    controller = _controller() if threads is not None else None
    if not controller:
        return contextlib.nullcontext()
    return controller.limit(limits=threads, user_api="blas")


def worker_init(threads=1, parent=None):
    """Initializer of a process-pool worker: ``threads`` threads for the kernels and for BLAS.

    Pass it as ``initializer=`` of a ``ProcessPoolExecutor`` (see :func:`process_pool`), so that
    ``jobs`` workers never run more than ``jobs * threads`` threads.  With ``parent`` (the pid of the
    process that makes the pool) the worker exits when that process is gone (killed with ``kill -9``).
    """
    threads = _positive_int(threads, "threads")
    # A Ctrl-C while the worker starts is the driver's to handle (it shuts the pool down); here it
    # would only print a traceback of the pool's internals.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if parent is not None:
            exit_with_parent(parent)
        os.environ[ENV_VAR] = str(threads)
        set_num_threads(threads)
        controller = _controller()
        if controller:
            controller.limit(limits=threads, user_api="blas")
    finally:
        signal.signal(signal.SIGINT, previous)


def _quiet_fork_context():
    """A fork context whose workers leave quietly (exit status 130) on a Ctrl-C between two tasks.

    Ctrl-C reaches every process of the terminal's group: a worker running a task sends the
    interruption back to the driver as the task's result, but an idle one, waiting for its next
    task, would print a traceback of the pool's internals on the user's terminal.
    """
    import multiprocessing.context as mpc

    class QuietProcess(mpc.ForkProcess):
        def run(self):
            try:
                super().run()
            except KeyboardInterrupt:
                raise SystemExit(130) from None

    class QuietForkContext(mpc.ForkContext):
        Process = QuietProcess

    return QuietForkContext()


def pool_workers(jobs, n_tasks):
    """Worker processes for ``n_tasks`` independent tasks: ``jobs`` (None: :func:`get_num_threads`),
    never more than the tasks nor the cores this process may use (0 when there is no task).

    The one rule of every process pool of the package (``sweep run``, ``reproduce``): asking for
    24 jobs on 4 runs starts 4 workers at most, not 24 idle processes.

    Examples
    --------
    >>> pool_workers(24, 1), pool_workers(24, 0)
    (1, 0)
    """
    jobs = get_num_threads() if jobs is None else _positive_int(jobs, "jobs")
    return min(jobs, check_int(n_tasks, "n_tasks", 0), available_cores())


def process_pool(jobs, threads_per_worker=1, mp_context=None):
    """A ``ProcessPoolExecutor`` of ``jobs`` workers, each running ``threads_per_worker`` threads.

    ``mp_context`` defaults to fork workers that leave without a traceback on a Ctrl-C between tasks.

    Examples
    --------
    >>> with process_pool(2) as pool:
    ...     sorted(pool.map(abs, [-1, -2]))
    [1, 2]
    """
    from concurrent.futures import ProcessPoolExecutor

    jobs = _positive_int(jobs, "jobs")
    if mp_context is None and os.name == "posix":
        mp_context = _quiet_fork_context()
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp_context, initializer=worker_init,
                               initargs=(_positive_int(threads_per_worker, "threads_per_worker"), os.getpid()))


class LoadProbe:
    """How many cores other work leaves free, from the machine's count of runnable tasks.

    On Linux the fourth field of ``/proc/loadavg`` counts the tasks (processes
    and threads) that are running or ready to run at this instant, the caller
    included.  Every other runnable task takes a core the package's threads
    would otherwise wait for at each barrier, so :meth:`usable` lowers a thread
    count to the cores left over.  The caller's own helper threads may still
    be spinning after a parallel region (OpenMP threads spin a while before
    they sleep): ``own`` of them are not counted as other work.  The file is
    read at most every ``interval`` seconds (about 10 us a read); where it
    cannot be read, nothing is lowered.  The count is a snapshot, so the
    timing chooser (:class:`SerialOrParallel`) still watches what the parallel
    path really costs.  Short-lived tasks (a shell command, a kernel worker)
    should not stop the parallel path: the count used is the smallest of the
    last ``memory`` readings, so only work that stays runnable for about
    ``memory * interval`` seconds lowers the threads.

    Examples
    --------
    >>> probe = LoadProbe(read=lambda: 3, interval=0)   # the caller and two other runnable tasks
    >>> probe.usable(8, cores=4)
    2
    >>> probe.usable(8, cores=2)               # never fewer than one thread
    1
    >>> LoadProbe(read=lambda: 3).usable(8, own=1, cores=4)   # one of them is the caller's
    3
    """

    def __init__(self, interval=0.01, memory=3, read=None, clock=None):
        import time

        self.interval = interval
        self.stale = memory * interval          # older readings say nothing about now
        self._read = read if read is not None else _runnable_tasks
        self._clock = clock if clock is not None else time.monotonic
        self._when = None
        self._recent = collections.deque(maxlen=memory)

    def others(self, own=0):
        """Runnable tasks besides the caller and ``own`` of its threads (None where unknown)."""
        now = self._clock()
        if self._when is None or now - self._when >= self.interval:
            runnable = self._read()
            if runnable is None or (self._when is not None and now - self._when > self.stale):
                self._recent.clear()
            if runnable is not None:
                self._recent.append(max(0, runnable - 1 - own))
            self._when = now
        return min(self._recent) if self._recent else None

    def usable(self, threads, own=0, cores=None):
        """``threads`` lowered to the cores the other runnable tasks leave free (at least 1)."""
        others = self.others(own)
        if others is None:
            return threads
        cores = available_cores() if cores is None else cores
        return max(1, min(threads, cores - others))


def _runnable_tasks():
    try:
        with open("/proc/loadavg", "rb") as fh:
            return int(fh.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


_LOAD = LoadProbe()
# OpenMP threads spin a few milliseconds after a parallel region before they sleep.
SPIN_SECONDS = 0.01
_last_parallel = (float("-inf"), 1)     # (time.monotonic() at its end, threads) of the last parallel call


def parallel_done(threads):
    """Note that a parallel call on ``threads`` threads just ended (its helpers may still spin)."""
    import time

    global _last_parallel
    _last_parallel = (time.monotonic(), threads)


def usable_threads(threads):
    """``threads`` lowered to the cores that the machine's other runnable tasks leave free now.

    For fine-grained parallel regions (a barrier every fraction of a
    millisecond), which wait a whole time slice whenever one of their threads
    is descheduled.  Helper threads of a parallel call that ended less than
    :data:`SPIN_SECONDS` ago (see :func:`parallel_done`) are the package's own,
    not other work.  Results never depend on it.
    """
    import time

    end, last = _last_parallel
    own = last - 1 if time.monotonic() - end < SPIN_SECONDS else 0
    return _LOAD.usable(threads, own)


def numba_threads(threads):
    """Threads to hand numba for ``threads`` requested: at most its pool size (``NUMBA_NUM_THREADS``)."""
    import numba

    return max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))


class SerialOrParallel:
    """Chooses, call by call, between a serial and a parallel code path that give identical results.

    Fine-grained parallel regions wait at every barrier for all their
    threads; when other processes take the cores, one descheduled thread
    makes each region wait a time slice and the parallel path becomes slower
    than the serial one.  Both paths are timed: the first ``warmup`` calls of
    each alternate (the very first call of each is not counted), then the
    parallel path runs when the mean of its last ``window`` times is below
    ``margin`` times the serial one's, else the serial path, and the other is tried again after an interval
    that doubles each time it loses (from ``probe_every`` up to
    ``max_interval`` calls), so a machine that becomes idle again is noticed.
    Means, not medians: on a busy machine most parallel calls are fast and a
    few wait a whole time slice, and those few decide the total.  The results do not depend on the choice, only the
    time does.

    Examples
    --------
    >>> choice = SerialOrParallel(warmup=1)
    >>> choice.first = {True: False, False: False}   # count the first calls too
    >>> parallel = choice.choose()          # first call: parallel
    >>> choice.record(parallel, 5e-3)
    >>> choice.record(choice.choose(), 1e-3)  # second call: serial, faster
    >>> choice.choose()
    False
    """

    def __init__(self, probe_every=8, max_interval=64, window=8, warmup=2, margin=0.85):
        self.margin = margin
        self.times = {True: collections.deque(maxlen=window), False: collections.deque(maxlen=window)}
        self.first = {True: True, False: True}
        self.warmup = warmup
        self.probe_every = self.interval = probe_every
        self.max_interval = max_interval
        self.calls = 0
        self.next_probe = probe_every
        self._lock = threading.Lock()

    def _mean(self, side):
        return statistics.fmean(self.times[side])

    def _faster(self):
        # The parallel path must win clearly: when the two are close (a busy machine), the serial
        # path is the one that cannot collapse.
        return self._mean(True) < self.margin * self._mean(False)

    def _warm(self):
        return all(len(t) >= self.warmup for t in self.times.values())

    def prefers_parallel(self):
        """Whether the parallel path is the faster one now (False while warming up); not a call."""
        with self._lock:
            return self._warm() and self._faster()

    def choose(self):
        """True to run the parallel path now."""
        with self._lock:
            self.calls += 1
            if not self._warm():
                return len(self.times[True]) <= len(self.times[False])
            best = self._faster()
            if self.calls >= self.next_probe:
                self.next_probe = self.calls + self.interval
                return not best
            return best

    def record(self, parallel, seconds):
        """Time of one call of the path ``parallel``."""
        with self._lock:
            if self.first[parallel]:        # a thread pool starting, code being loaded: not the path's speed
                self.first[parallel] = False
                return
            before = self._faster() if self._warm() else None
            self.times[parallel].append(seconds)
            if before is not None and parallel != before:   # a probe of the slower path
                if self._faster() == before:
                    self.interval = min(2 * self.interval, self.max_interval)
                else:
                    self.interval = self.probe_every
                self.next_probe = self.calls + self.interval


# numba's fallback threading layer (workqueue, when neither OpenMP nor TBB is
# installed) aborts if two parallel kernels run at once, and two at once would
# overbook the cores anyway: parallel kernels started from several Python
# threads take turns.
PARALLEL_LOCK = threading.Lock()

_CHOICES = {}
_CHOICES_LOCK = threading.Lock()


def serial_or_parallel(key):
    """The process-wide :class:`SerialOrParallel` of one kind of work (``key``: its shape and threads)."""
    with _CHOICES_LOCK:
        choice = _CHOICES.get(key)
        if choice is None:
            choice = _CHOICES[key] = SerialOrParallel()
        return choice
