"""Input checks shared by every public entry point (the one validation layer).

Conversion policy (documented in the README and docs/errors.md): integer,
boolean and float32 arrays are converted to float64; complex, object, string
and ragged arrays are refused.  Every array must be finite.  Scalars are
checked for their type before their value: a count is an ``int`` (``2.7`` and
``2.0`` are refused, never truncated), a rate or a tolerance is a real number
(``"0.01"`` is refused), a seed is an ``int >= 0`` or a ``numpy.random.Generator``.
Every message names the parameter by its public name.  These checks run
before any work.
"""

import difflib
import numbers
import os

import numpy as np


def _real_array(array, name):
    """``array`` as an ndarray of real numbers (any real dtype), or the refusal of complex, string, object and
    ragged input naming ``name``."""
    try:
        arr = np.asarray(array)
    except ValueError:
        raise ValueError(f"{name} is ragged: its rows have different lengths "
                         "(it must be a rectangular array of numbers)") from None
    if arr.dtype == object:
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in arr.ravel()):
            raise ValueError(f"{name} is ragged: its rows have different lengths "
                             "(it must be a rectangular array of numbers)")
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind in "USVMm":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    return arr


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
    >>> as_float64([[1, 2], [3]], "X")
    Traceback (most recent call last):
    ...
    ValueError: X is ragged: its rows have different lengths (it must be a rectangular array of numbers)
    """
    arr = np.ascontiguousarray(_real_array(array, name), dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} contains NaN or Inf (first at index {tuple(int(i) for i in bad)})")
    return arr


def as_float64_param(value, what):
    """A parameter array (a weight, a bias) as a new read-only, C-ordered float64 array, or a clear error.

    Real numbers of any dtype are converted (integers, booleans, float16/32);
    complex values are refused rather than losing their imaginary part, and
    strings, objects and ragged nesting get a message naming ``what`` rather
    than numpy's.  Finiteness is the caller's check (it names the node).

    Parameters
    ----------
    value : array_like
    what : str
        The parameter as the user knows it, e.g. ``"node 'fc': parameter 'weight'"``.

    Examples
    --------
    >>> w = as_float64_param([[1, 2]], "weight")
    >>> w.dtype, w.flags.writeable
    (dtype('float64'), False)
    >>> as_float64_param([1j], "node 'fc': parameter 'weight'")
    Traceback (most recent call last):
    ...
    TypeError: node 'fc': parameter 'weight' must be real, got complex dtype complex128
    """
    array = np.array(_real_array(value, what), dtype=np.float64, order="C", copy=True)
    array.flags.writeable = False
    return array


def as_int_tuple(value, n_axes, minimum, what):
    """A per-axis attribute (an int for every axis, or a sequence of ``n_axes`` ints) as a tuple of ints
    ``>= minimum``; ValueError naming ``what`` for anything else (``1.5``, ``2.0``, ``True``, ``"2"``).

    Examples
    --------
    >>> as_int_tuple(2, 2, 1, "stride"), as_int_tuple((1, 0), 2, 0, "padding")
    ((2, 2), (1, 0))
    >>> as_int_tuple(1.5, 1, 1, "node 'conv' (conv): stride")
    Traceback (most recent call last):
    ...
    ValueError: node 'conv' (conv): stride must be 1 integer(s) >= 1, got 1.5
    """
    def integer(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) and v >= minimum

    if integer(value):
        values = (value,) * n_axes
    else:
        values = tuple(value) if isinstance(value, (tuple, list, np.ndarray)) else ()
    if len(values) != n_axes or not all(integer(v) for v in values):
        raise ValueError(f"{what} must be {n_axes} integer(s) >= {minimum}, got {value!r}")
    return tuple(int(v) for v in values)


def as_samples(X, n_features, name="X", input_shape=None):
    """Validate samples-as-rows data for a network with ``n_features`` inputs.

    Parameters
    ----------
    input_shape : tuple of int, optional
        The per-sample shape of a graph network's input, e.g. ``(1, 40)``:
        a batch in the model's own shape ``(n_samples, *input_shape)`` (or one
        sample of shape ``input_shape``) is accepted and flattened in C order.

    Returns
    -------
    X2 : ndarray, shape (n_samples, n_features), float64
    was_1d : bool
        True when a single sample was given (1-D, or of shape ``input_shape``).

    Examples
    --------
    >>> as_samples(np.zeros((5, 1, 40)), 40, input_shape=(1, 40))[0].shape
    (5, 40)
    """
    X2 = as_float64(X, name)
    shaped = input_shape is not None and len(input_shape) > 1
    if shaped and X2.shape[1:] == tuple(input_shape):
        X2 = X2.reshape(X2.shape[0], -1)
    elif shaped and X2.shape == tuple(input_shape):
        X2 = X2.reshape(-1)
    was_1d = X2.ndim == 1
    if was_1d:
        X2 = X2[None, :]
    expected = f"(n_samples, {n_features})" + (f" or (n_samples, *{tuple(input_shape)})" if shaped else "")
    if X2.ndim != 2:
        raise ValueError(f"{name} must be 1-D (one sample) or 2-D {expected}; got shape {X2.shape}")
    if X2.shape[0] == 0:
        raise ValueError(f"{name} is empty: it has no samples")
    if X2.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X2.shape[1]} features per sample but the network takes {n_features} "
            f"(expected shape {expected})"
        )
    return X2, was_1d


def check_type(value, expected, name, what, hint=""):
    """Return ``value`` if it is an instance of ``expected``, else a TypeError naming ``what`` was expected.

    The one type check of the public entry points: a wrong object is refused
    at the door, before an attribute lookup deep inside fails on it.

    Parameters
    ----------
    expected : type or tuple of type
    name : str
        The parameter's public name.
    what : str
        The expected type as the user knows it, e.g. ``"a sheaflinalg.Network"``.
    hint : str
        Appended to the message (how to obtain the right object).

    Examples
    --------
    >>> check_type(3, int, "n", "an int")
    3
    >>> check_type("net.npz", int, "net", "an int")
    Traceback (most recent call last):
    ...
    TypeError: net must be an int, got str 'net.npz'
    """
    if not isinstance(value, expected):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {_short_repr(value)}{hint}")
    return value


def check_path(value, name):
    """Return a file name (``str``, ``bytes`` or ``os.PathLike``) as a ``str``, else TypeError.

    Examples
    --------
    >>> check_path(3, "db")
    Traceback (most recent call last):
    ...
    TypeError: db must be a file name (str or os.PathLike), got int 3
    """
    if isinstance(value, (bytes, os.PathLike)):
        value = os.fsdecode(value)
    check_type(value, str, name, "a file name (str or os.PathLike)")
    if not value or "\0" in value:
        raise ValueError(f"{name} must be a non-empty file name without NUL characters, got {value!r}")
    return value


def _short_repr(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_choice(value, choices, name):
    """Raise ValueError unless ``value`` is one of ``choices``."""
    try:
        ok = value in choices
    except TypeError:  # unhashable value
        ok = False
    if not ok:
        raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(map(repr, choices))}")
    return value


def check_real(value, name):
    """Return ``value`` as a float if it is a real number (not a string, bool or array), else TypeError.

    Examples
    --------
    >>> check_real(1, "alpha")
    1.0
    >>> check_real("0.01", "dt")
    Traceback (most recent call last):
    ...
    TypeError: dt must be a real number, got str '0.01'
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def check_bool(value, name):
    """Return ``value`` as a bool if it is one (Python or numpy), else TypeError: a flag is never read
    by truthiness (``vectors="no"`` would mean True).

    Examples
    --------
    >>> check_bool(False, "vectors")
    False
    >>> check_bool("no", "vectors")
    Traceback (most recent call last):
    ...
    TypeError: vectors must be True or False, got str 'no'
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {_short_repr(value)}")
    return bool(value)


def check_positive(value, name):
    """Return ``value`` as a float if it is a finite real number > 0, else raise.

    Examples
    --------
    >>> check_positive(0.5, "dt")
    0.5
    """
    value = check_real(value, name)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def check_tol(value, name="tol", zero=True):
    """Return a tolerance as a float: finite and ``>= 0`` (``> 0`` with ``zero=False``).

    ``inf`` is refused: a run with ``tol=inf`` would stop after one step and
    report convergence; ``nan`` and negative values would make every check fail.

    Examples
    --------
    >>> check_tol(0, "tol")
    0.0
    >>> check_tol(float("inf"), "tol")
    Traceback (most recent call last):
    ...
    ValueError: tol must be a finite number >= 0, got inf
    """
    value = check_real(value, name)
    if not np.isfinite(value) or value < 0 or (not zero and value == 0):
        raise ValueError(f"{name} must be a finite number {'>=' if zero else '>'} 0, got {value!r}")
    return value


#: Largest count accepted: the compiled loops count in int64.
INT_MAX = 2 ** 62


def check_int(value, name, minimum=1, maximum=INT_MAX):
    """Return ``value`` as an int, or raise unless it is an integer in ``[minimum, maximum]``.

    Booleans and floats are refused (``2.0`` is not a step count) with a
    TypeError; integers out of range with a ValueError (``maximum`` defaults
    to :data:`INT_MAX`, as the compiled loops count in int64).

    Examples
    --------
    >>> check_int(3, "steps")
    3
    >>> check_int(2.7, "steps")
    Traceback (most recent call last):
    ...
    TypeError: steps must be an integer, got float 2.7
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if maximum is not None and value > maximum:
            kind = f"an integer <= {maximum}"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return int(value)


def check_optional_int(value, name, minimum=1):
    """``None`` or :func:`check_int`."""
    return None if value is None else check_int(value, name, minimum)


def check_seed(seed, name="seed"):
    """Return ``seed`` if it is ``None``, an ``int >= 0`` or a ``numpy.random.Generator``, else raise.

    Examples
    --------
    >>> check_seed(3)
    3
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer >= 0 or a numpy.random.Generator, got -1
    """
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= 0 or a numpy.random.Generator, "
                        f"got {type(seed).__name__} {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be an integer >= 0 or a numpy.random.Generator, got {seed!r}")
    return int(seed)


def check_dims(dims, name="dims"):
    """Return layer widths as a list of ints ``>= 1`` (at least two), refusing non-integers.

    Examples
    --------
    >>> check_dims((2, 30, 1))
    [2, 30, 1]
    >>> check_dims([2.7, 30.9, 1])
    Traceback (most recent call last):
    ...
    TypeError: dims[0] must be an integer, got float 2.7
    """
    if isinstance(dims, (str, bytes)) or not hasattr(dims, "__len__"):
        raise TypeError(f"{name} must be a sequence of layer widths such as [2, 30, 1], got {dims!r}")
    out = [check_int(d, f"{name}[{i}]", minimum=-np.inf) for i, d in enumerate(dims)]
    if len(out) < 2:
        raise ValueError(f"{name} needs at least an input and an output width, got {list(dims)}")
    if min(out) < 1:
        raise ValueError(f"every layer needs at least one neuron, got {name} {out}")
    return out


def did_you_mean(name, choices, shown=12):
    """A hint for an unknown ``name``: the closest of ``choices``, else (some of) the choices.

    Examples
    --------
    >>> did_you_mean("layer1.0.cnv1", ["layer1.0.conv1", "layer2.0.conv1", "fc"])
    "did you mean 'layer1.0.conv1'?"
    >>> did_you_mean("zz", ["a", "b"])
    'expected one of a, b'
    """
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    listed = ", ".join(choices[:shown]) + (f", ... ({len(choices)} in all)" if len(choices) > shown else "")
    return f"expected one of {listed}"
