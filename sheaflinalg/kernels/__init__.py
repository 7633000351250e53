"""numba-compiled kernels: the one force routine, products, the heat and training loops, block
substitutions, convolution and pooling products and their transposes.  No Python API here
(``dynamics``, ``training``, ``spectral`` and the graph forward pass drive them); bottom layer:
imports nothing else of the package.

numba's on-disk cache (``cache=True``) is keyed on each kernel's own source
file, not on the files it calls into: after an edit of ``force.py`` alone, a
cached ``heat.py`` or ``training.py`` kernel would still run the old inlined
force routine.  On import we therefore compare a hash of every kernel source
with the one stored beside the cache and drop the cache when they differ.
"""

import glob
import hashlib
import os
import types


def drop_stale_numba_cache(here=os.path.dirname(os.path.abspath(__file__))):
    """Delete numba's cache files in ``here/__pycache__`` unless ``here/*.py`` are unchanged."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(here, "*.py"))):
        with open(path, "rb") as f:
            digest.update(f.read())
    cache_dir = os.path.join(here, "__pycache__")
    stamp = os.path.join(cache_dir, "kernel-sources.sha256")
    try:
        with open(stamp) as f:
            if f.read() == digest.hexdigest():
                return
    except OSError:
        pass
    try:
        for path in glob.glob(os.path.join(cache_dir, "*.nb[ic]")):
            os.remove(path)
        os.makedirs(cache_dir, exist_ok=True)
        # Written aside and renamed: a process importing at the same moment must never read a
        # half-written stamp (it would take the cache for stale and delete it under the others).
        tmp = f"{stamp}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(digest.hexdigest())
        os.replace(tmp, stamp)
    except OSError:  # read-only installation: nothing cached there either
        pass


def renamed(func, name):
    """A copy of the plain function ``func`` under the name ``name``.

    numba names its cache files after the function and keys the entries by
    argument types, not by compile options: a serial and a ``parallel=True``
    compilation of one function for the same argument types would load each
    other's code.  Compiling renamed copies keeps them apart.
    """
    copy = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__, func.__closure__)
    copy.__qualname__ = name
    copy.__doc__ = func.__doc__
    return copy


drop_stale_numba_cache()
