"""Big buffers that are filled again and again (a forward pass keeps every node's value): the last ones are
reused once nothing holds them any more.

Every fresh page of a buffer costs a fault and the zeroing of the page on its first touch: ResNet-20's
forward pass at batch 16 keeps 87 MB of values, and first touching them took 15% of its time
(``docs/performance.md``).  :func:`spare_empty` keeps the last :data:`SPARES` buffers of at most
:data:`SPARE_BYTES` each and hands one out again when every array made from it is gone (numpy's views
hold a reference to the buffer they look into, so its reference count tells).  One bigger buffer is kept
too while it is at most :data:`LARGE_SHARE` of the memory still available: ResNet-50's pass at batch 8
keeps 2.4 GB of values, and first touching them again at every pass cost about a tenth of its time.
"""

import sys
import threading

import numpy as np

from .memory import available_bytes

#: Buffers kept for reuse, and the largest kept (bytes).
SPARES = 2
SPARE_BYTES = 1 << 28
#: The largest share of the available memory (:func:`~sheaflinalg._common.memory.available_bytes`) that the one
#: buffer bigger than :data:`SPARE_BYTES` kept for reuse may take.
LARGE_SHARE = 0.25
_lock = threading.Lock()
_spares = []


def _references(items, k):
    """The reference count of ``items[k]`` as seen here."""
    return sys.getrefcount(items[k])


#: What :func:`_references` counts for a buffer held by the list alone (measured, not assumed).
_UNHELD = _references([np.empty(1)], 0)


def spare_empty(n):
    """``np.empty(n)`` (float64), the memory of a kept buffer of that size that nothing holds any more if there is one.

    Examples
    --------
    >>> a = spare_empty(1000); a[:] = 1.0
    >>> b = spare_empty(1000)          # a is held: fresh memory
    >>> b is a
    False
    >>> del a, b
    >>> spare_empty(1000).size
    1000
    """
    with _lock:
        free = [k for k in range(len(_spares)) if _spares[k].size == n and _references(_spares, k) == _UNHELD]
        buffer = _spares.pop(free[0]) if free else np.empty(n)
        small = [b for b in _spares if 8 * b.size <= SPARE_BYTES]
        large = [b for b in _spares if 8 * b.size > SPARE_BYTES]
        if 8 * n <= SPARE_BYTES:
            small = (small + [buffer])[-SPARES:]
        elif 8 * n <= LARGE_SHARE * (available_bytes() or 0):
            large = [buffer]
        _spares[:] = small + large
    return buffer
