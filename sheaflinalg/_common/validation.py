"""Input checks shared by every public entry point.

Conversion policy (documented in the README): integer, boolean and float32
arrays are converted to float64; complex, object and string arrays are
refused.  Every array must be finite.  These checks run before any work.
"""

import numpy as np


def as_float64(array, name):
    """Return ``array`` as a float64 ndarray, or raise a clear error.

    Parameters
    ----------
    array : array_like
        Data to convert.
    name : str
        Name used in error messages.

    Examples
    --------
    >>> as_float64([1, 2], "x").dtype
    dtype('float64')
    """
    arr = np.asarray(array)
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or Inf (first at index {tuple(int(i) for i in bad)})")
    return arr


def as_samples(X, n_features, name="X"):
    """Validate samples-as-rows data for a network with ``n_features`` inputs.

    Returns
    -------
    X2 : ndarray, shape (n_samples, n_features), float64
    was_1d : bool
        True when a single 1-D sample was given.
    """
    X2 = as_float64(X, name)
    was_1d = X2.ndim == 1
    if was_1d:
        X2 = X2[None, :]
    if X2.ndim != 2:
        raise ValueError(f"{name} must be 1-D (one sample) or 2-D (n_samples, n_features); got shape {X2.shape}")
    if X2.shape[0] == 0:
        raise ValueError(f"{name} is empty: it has no samples")
    if X2.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X2.shape[1]} features per sample but the network takes {n_features} "
            f"(expected shape (n_samples, {n_features}))"
        )
    return X2, was_1d


def check_choice(value, choices, name):
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(map(repr, choices))}")
    return value


def check_positive(value, name):
    """Raise ValueError unless ``value`` is a finite number > 0."""
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_int(value, name, minimum=1):
    """Return ``value`` as an int, or raise ValueError unless it is an integer ``>= minimum``.

    Booleans and floats are refused (``2.0`` is not a step count).

    Examples
    --------
    >>> check_int(3, "steps")
    3
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return int(value)
