"""Worker processes that end with the process that started them.

A process-pool worker waits on a pipe from its parent; when the parent is killed (``kill -9``) the
pipe is never closed, because the worker's own inherited copy keeps it open, so the worker would wait
for ever.  :func:`exit_with_parent` starts a daemon thread in the worker that polls, every second,
whether the parent still runs (the parent pid recorded at start, and the worker's ``os.getppid()``,
which changes when it is re-parented) and ends the worker at once (``os._exit``) when it does not.
Polling works on every platform; it needs no signal and leaves the worker's signal handlers alone.
"""

import os
import threading
import time

from .atomic import pid_running

POLL_S = 1.0


def exit_with_parent(parent_pid, poll=POLL_S):
    """In a child process: exit as soon as the process ``parent_pid`` is gone (checked every ``poll`` s)."""
    start_ppid = os.getppid()
    if parent_gone(parent_pid, start_ppid):
        os._exit(1)
    thread = threading.Thread(target=_watch, args=(parent_pid, start_ppid, poll), daemon=True,
                              name="sheaflinalg-parent-watch")
    thread.start()


def parent_gone(parent_pid, start_ppid):
    """Whether the process ``parent_pid`` ended, or this process was re-parented since its parent was
    ``start_ppid``.

    Examples
    --------
    >>> parent_gone(os.getppid(), os.getppid())
    False
    """
    return os.getppid() != start_ppid or not pid_running(parent_pid)


def _watch(parent_pid, start_ppid, poll):
    while True:
        time.sleep(poll)
        if parent_gone(parent_pid, start_ppid):
            os._exit(1)           # no cleanup to do: the parent that would use our results is gone
