"""BLAS/LAPACK thread limits (threadpoolctl), shared by every part that calls BLAS."""

import contextlib

import numpy as np

_CONTROLLER = None


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
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"{name} must be None or a positive integer, got {threads!r}")
    return int(threads)


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
