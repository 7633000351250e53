"""Atomic file output: write to a temporary file beside the target, then rename.

An interrupted run therefore never leaves a half-written file behind.
"""

import contextlib
import os
import tempfile

import numpy as np


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; on success rename it to ``path``, else delete it.

    The temporary name keeps ``path``'s extension, so writers that infer the
    format from it (``numpy.savez``, ``Figure.savefig``) behave as for ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_path(target) as tmp:
    ...     _ = open(tmp, "w").write("done")
    >>> open(target).read()
    'done'
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=os.path.splitext(path)[1], dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path, text):
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        f.write(text)


def save_npz(path, **arrays):
    """``numpy.savez`` to ``path`` atomically (plain arrays only: readable without pickle)."""
    with atomic_path(path) as tmp:
        np.savez(tmp, **arrays)


def save_figure(fig, path, **kwargs):
    """``fig.savefig(path, **kwargs)`` atomically."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **kwargs)
