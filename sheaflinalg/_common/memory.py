"""Memory estimates before big allocations.

A computation that would need more memory than the process can get is
refused before it starts, with the estimate and a way out, instead of
swapping, being killed by the kernel or dying in the middle with numpy's
``MemoryError``.  The memory available is the smaller of the system's
``MemAvailable`` (``/proc/meminfo``) and the headroom left under the
process's address-space limit (``RLIMIT_AS`` minus the current ``VmSize``).
"""

import resource

FLOAT = 8
#: Fraction of the available memory one allocation may take.
SHARE = 0.9


class InsufficientMemoryError(MemoryError):
    """A computation was refused because its memory estimate exceeds the available memory."""


def _proc_kib(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_bytes():
    """Bytes this process can still allocate: ``min(MemAvailable, RLIMIT_AS - VmSize)`` (None if unknown).

    Examples
    --------
    >>> n = available_bytes()
    >>> n is None or n >= 0
    True
    """
    limits = []
    mem = _proc_kib("/proc/meminfo", "MemAvailable")
    if mem is not None:
        limits.append(mem)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        used = _proc_kib("/proc/self/status", "VmSize") or 0
        limits.append(max(0, soft - used))
    return min(limits) if limits else None


def format_bytes(n):
    """``1536`` -> ``'1.5 KiB'``.

    Examples
    --------
    >>> format_bytes(9.5 * 2**30)
    '9.5 GiB'
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.3g} {unit}" if n < 100 else f"{n:.0f} {unit}"
        n /= 1024.0


def check_memory(n_bytes, what, way_out, available=None):
    """Raise :class:`InsufficientMemoryError` if ``n_bytes`` exceeds the memory available.

    Parameters
    ----------
    n_bytes : int or float
        Estimate of the allocation.
    what : str
        What needs it (``"the dense spectra of 30000 inputs"``).
    way_out : str
        How to do it with less (``"use method='arpack'"``).
    available : int, optional
        Override :func:`available_bytes` (tests).

    Examples
    --------
    >>> try:
    ...     check_memory(10 * 2**30, "the dense spectra", "use method='arpack'", available=2**30)
    ... except InsufficientMemoryError as exc:
    ...     print(exc)
    the dense spectra: about 10 GiB needed but only 1 GiB of memory is available; use method='arpack'
    """
    avail = available_bytes() if available is None else available
    if avail is not None and n_bytes > SHARE * avail:
        raise InsufficientMemoryError(
            f"{what}: about {format_bytes(n_bytes)} needed but only {format_bytes(avail)} of memory is "
            f"available; {way_out}")


#: Batches estimated below this are not checked (reading /proc costs more than they can harm).
BATCH_FLOOR = 64 * 2**20


def check_batch(n_samples, per_sample, what, available=None):
    """:func:`check_memory` for a batch of independent samples: ``n_samples * per_sample`` bytes.

    The rule for every function that takes a batch (forward pass, harmonic
    extension, verification, spectra): estimate before the first array of
    the batch is allocated, so that a huge batch is refused in one line
    instead of failing inside numpy or being killed by the system.

    Examples
    --------
    >>> try:
    ...     check_batch(10**8, 2000, "the spectra", available=2**30)
    ... except InsufficientMemoryError as exc:
    ...     print(exc)
    the spectra of 100000000 samples: about 186 GiB needed but only 1 GiB of memory is available; pass fewer samples at a time (samples are independent)
    """
    n_bytes = n_samples * per_sample
    if n_bytes >= BATCH_FLOOR:
        check_memory(n_bytes, f"{what} of {n_samples} samples", "pass fewer samples at a time (samples are "
                     "independent)", available)
