"""Atomic file output: checked up front, written beside the target under a recognisable name, renamed.

The rules (``docs/errors.md``, *Files and writes*):

- :func:`prepare_target` checks, before any work, that the target's directory
  exists and accepts a new file and that the target is not a directory; it
  names the parameter or option and the path.
- :func:`atomic_file` writes under exactly the name asked for (no extension
  is ever added) through a temporary file ``.NAME.PID.TOKEN.tmp`` in the same
  directory, flushed to disk and renamed over the target; the temporary file
  is removed on every error, ``KeyboardInterrupt`` included.
- Temporary files of the same target left by a killed process (its pid is
  no longer running) are removed at the next :func:`prepare_target` or
  :func:`atomic_file` of that target.
"""

import contextlib
import os
import re
import secrets
import threading

import numpy as np

_STEM_MAX = 180                       # keeps ".NAME.PID.TOKEN.tmp" within the usual 255-byte name limit
_TEMP_TAIL = re.compile(r"\.(\d{1,10})\.[0-9a-f]{8}\.tmp")
_active = set()                       # temporary files this process is writing now
_active_lock = threading.Lock()


def _stem(path):
    return "." + os.path.basename(path)[:_STEM_MAX]


def temp_path(path, pid=None, token=None):
    """The temporary file used to write ``path``: ``.NAME.PID.TOKEN.tmp`` in the same directory.

    Examples
    --------
    >>> temp_path("/data/run.npz", pid=42, token="0123abcd")
    '/data/.run.npz.42.0123abcd.tmp'
    """
    path = os.path.abspath(os.fspath(path))
    pid = os.getpid() if pid is None else pid
    token = secrets.token_hex(4) if token is None else token
    return os.path.join(os.path.dirname(path), f"{_stem(path)}.{pid}.{token}.tmp")


def pid_running(pid):
    """Whether process ``pid`` exists (a zombie counts as running until it is reaped)."""
    if os.name != "posix":            # os.kill(pid, 0) would terminate the process on Windows
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return False
    except OSError:                   # e.g. EPERM: it exists but belongs to another user
        return True
    return True


def remove_stale_temps(path):
    """Remove the temporary files of ``path`` left by processes that are no longer running.

    Returns the list of removed files.  Files of running processes, and the
    ones this process is writing now, are left alone.
    """
    path = os.path.abspath(os.fspath(path))
    directory, stem = os.path.dirname(path), _stem(path)
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(stem):
            continue
        match = _TEMP_TAIL.fullmatch(name[len(stem):])
        if match is None:
            continue
        full = os.path.join(directory, name)
        pid = int(match.group(1))
        with _active_lock:
            mine = full in _active
        # A temp of our own pid that we are not writing was left by a dead process whose pid was reused.
        if mine or (pid != os.getpid() and pid_running(pid)):
            continue
        with contextlib.suppress(OSError):
            os.remove(full)
            removed.append(full)
    return removed


def prepare_target(path, name="path"):
    """Check that ``path`` can be written (before any work) and clean stale temporary files of it.

    Parameters
    ----------
    path : str or path-like
    name : str
        Public name of the parameter or option, used in the error message.

    Returns
    -------
    str
        ``path`` as a string.

    Raises
    ------
    ValueError
        The name is empty, the directory does not exist or does not accept a
        new file, or the target is a directory or not a regular file.

    Examples
    --------
    >>> prepare_target("/no/such/dir/run.npz", "checkpoint")
    Traceback (most recent call last):
    ...
    ValueError: checkpoint: cannot write '/no/such/dir/run.npz': directory '/no/such/dir' does not exist
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a file name (str or path-like), got {type(path).__name__}")
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path or path.endswith(("/", os.sep)):
        raise ValueError(f"{name}: {path!r} is not a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"{name}: cannot write {path!r}: directory {directory!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{name}: cannot write {path!r}: it is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        raise ValueError(f"{name}: cannot write {path!r}: it exists and is not a regular file")
    remove_stale_temps(path)
    probe = temp_path(path)
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        raise ValueError(f"{name}: cannot write {path!r}: directory {directory!r} does not accept new files "
                         f"({exc.strerror})") from None
    with contextlib.suppress(FileNotFoundError):
        os.remove(probe)
    return path


@contextlib.contextmanager
def atomic_file(path, mode="wb", name="path"):
    """Open a temporary file for writing ``path``; on success it replaces ``path``, on any error it is removed.

    ``path`` is written under exactly that name (no extension is added).

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_file(target, "w") as f:
    ...     _ = f.write("done")
    >>> open(target).read(), os.listdir(os.path.dirname(target))
    ('done', ['out.txt'])
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes new files only: mode 'w' or 'wb', got {mode!r}")
    path = prepare_target(path, name)
    tmp = temp_path(path)
    with _active_lock:
        _active.add(tmp)
    replaced = False
    try:
        # "x": created here or not at all (O_EXCL), with the usual permissions (0o666 less the umask)
        with open(tmp, mode.replace("w", "x"), **({} if "b" in mode else {"newline": "", "encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        replaced = True
    finally:
        try:
            if not replaced:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
        finally:
            with _active_lock:
                _active.discard(tmp)


def write_text(path, text, name="path"):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_file(path, "w", name) as f:
        f.write(text)


def save_npz(path, arrays, name="path"):
    """``numpy.savez(path, **arrays)`` to exactly ``path``, atomically (plain arrays only: readable without pickle)."""
    with atomic_file(path, "wb", name) as f:
        np.savez(f, **arrays)


def save_figure(fig, path, name="path", **kwargs):
    """``fig.savefig(path, **kwargs)`` atomically; the format comes from ``path``'s extension (PNG without one)."""
    fmt = kwargs.pop("format", None) or os.path.splitext(os.fspath(path))[1][1:].lower() or None
    with atomic_file(path, "wb", name) as f:
        fig.savefig(f, format=fmt, **kwargs)
