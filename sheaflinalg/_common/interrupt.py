"""A Ctrl-C that cannot be lost.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the interpreter
happens to be.  When that is a finaliser (``__del__``, such as the ones numba's
compiler runs while it frees machine code), the exception is printed as
"ignored" and the program carries on as if nothing had happened: a command
interrupted at that moment would run to its end and exit with status 0.  The
command line therefore records every SIGINT as well as raising it
(:func:`catching_interrupts`), the loops of long runs check the record between
items (:func:`check_interrupt`, called by :func:`~sheaflinalg._common.progress.progress_iter`),
and the command reports itself interrupted when the record is set.  Outside the
command line no handler is installed: a library leaves its user's signals alone.
"""

import signal
import threading
from contextlib import contextmanager

_STATE = {"pending": False}


def _record_and_raise(signum, frame):
    _STATE["pending"] = True
    raise KeyboardInterrupt


@contextmanager
def catching_interrupts():
    """Within the block, every SIGINT is recorded as well as raised; after it, the handler and the record are reset.

    Only the main thread can install a signal handler; elsewhere the block changes nothing.

    Examples
    --------
    >>> with catching_interrupts():
    ...     interrupt_pending()
    False
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE["pending"] = False
    previous = signal.signal(signal.SIGINT, _record_and_raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _STATE["pending"] = False


def interrupt_pending():
    """Whether a SIGINT arrived in the current :func:`catching_interrupts` block (even one whose exception was
    swallowed)."""
    return _STATE["pending"]


def check_interrupt():
    """Raise ``KeyboardInterrupt`` if a SIGINT was recorded: a Ctrl-C swallowed by a finaliser still stops the run.

    Examples
    --------
    >>> check_interrupt()       # nothing recorded
    """
    if _STATE["pending"]:
        raise KeyboardInterrupt
