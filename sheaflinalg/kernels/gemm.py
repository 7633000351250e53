"""The dense products of the convolution kernels: numpy's BLAS, or torch's (MKL) when asked for.

torch's own BLAS multiplies the shapes of a convolution's im2col product 10-50% faster than
the OpenBLAS numpy ships with, one thread each (``docs/performance.md``, graph forward pass),
but whole forward passes measured under load were no faster with it, so numpy's is the
default.  ``"torch"`` (:func:`set_gemm_backend`, or the environment variable
``SHEAFLINALG_GEMM=torch``) imports torch and uses it; ``"auto"`` uses it once torch is
imported.  It serves only code that asked for it with :func:`single_threaded` (the graph
forward pass's sample blocks): there torch's threads are pinned to one in the calling thread,
so that a result never depends on the thread count.  torch is never a requirement.  The two
agree to rounding, not bit for bit.
"""

import contextlib
import os
import sys
import threading
import warnings

import numpy as np

ENV_VAR = "SHEAFLINALG_GEMM"
BACKENDS = ("auto", "numpy", "torch")
DEFAULT = "numpy"
_state = {"backend": None}
_local = threading.local()


def set_gemm_backend(name):
    """Choose the products' backend: ``"auto"`` (torch once it is imported), ``"numpy"`` or ``"torch"``.

    Examples
    --------
    >>> set_gemm_backend("numpy"); gemm_backend()
    'numpy'
    >>> set_gemm_backend(DEFAULT)
    """
    if name not in BACKENDS:
        raise ValueError(f"the product backend must be one of {BACKENDS}, got {name!r}")
    if name == "torch":
        try:
            import torch  # noqa: F401  (loaded for the products)
        except ImportError:
            raise ValueError("the product backend 'torch' needs torch, which is not importable") from None
    _state["backend"] = name


def gemm_backend():
    """The backend in use now: ``"torch"`` or ``"numpy"``.

    Examples
    --------
    >>> gemm_backend() in ("torch", "numpy")
    True
    """
    if _state["backend"] is None:
        name = os.environ.get(ENV_VAR, DEFAULT).strip() or DEFAULT
        if name not in BACKENDS:
            raise ValueError(f"environment variable {ENV_VAR} must be one of {BACKENDS}, got {name!r}")
        set_gemm_backend(name)
    return "torch" if _state["backend"] != "numpy" and "torch" in sys.modules else "numpy"


@contextlib.contextmanager
def single_threaded():
    """Within it, in the calling thread, :func:`matmul` may use torch, its threads pinned to one (restored after)."""
    if gemm_backend() != "torch" or getattr(_local, "torch", False):
        yield
        return
    torch = sys.modules["torch"]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    _local.torch = True
    try:
        yield
    finally:
        _local.torch = False
        torch.set_num_threads(before)


def matmul(a, b, out):
    """``out = a @ b`` (numpy arrays, ``out`` written; stacks broadcast as ``np.matmul``): torch's BLAS
    inside :func:`single_threaded` with the torch backend (``out`` C-contiguous), numpy's elsewhere."""
    if not getattr(_local, "torch", False) or not out.flags.c_contiguous:
        np.matmul(a, b, out=out)
        return
    torch = sys.modules["torch"]
    torch.matmul(_tensor(torch, a), _tensor(torch, b), out=torch.from_numpy(out))


def _tensor(torch, x):
    """``x`` as a torch tensor sharing its memory (a read-only array, such as a weight, is only read)."""
    if x.flags.writeable:
        return torch.from_numpy(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(x)
