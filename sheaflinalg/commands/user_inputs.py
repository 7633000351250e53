"""What a user brings to the command line: a network file (ONNX or the library's own ``.npz``), inputs, labels.

:func:`load_network` reads ``--network``, :func:`load_inputs` reads ``--inputs`` and ``--labels`` and
checks them (:func:`fit_network`: against the network); every refusal happens before any work, as one
``ValueError`` (or ``FileNotFoundError``) whose message names the file.  Arrays are read without pickle
(:func:`~sheaflinalg._common.npzfile.read_npy`, :func:`~sheaflinalg._common.npzfile.read_npz`: crafted
headers, truncated archives and object arrays are refused).

File forms
----------
``--network``: ``model.onnx`` (:meth:`sheaflinalg.Network.from_onnx`) or ``net.npz`` (a file written by
:meth:`sheaflinalg.Network.save`).
``--inputs``: ``X.npy``, or ``X.npz`` holding one array (or an array named :data:`INPUTS_KEY`), or
``X.npz:key`` naming the array; numeric (integers such as ``uint8`` images are converted to float64),
finite, shape ``(M, *input_shape)`` or ``(M, n_inputs)``.
``--labels``: ``y.npy`` (or ``y.npz``, ``y.npz:key``; default key :data:`LABELS_KEY`), integers, one per input.
"""

import math
import os

import numpy as np

#: The array of an ``--inputs`` ``.npz`` file holding several, unless ``FILE.npz:key`` names another.
INPUTS_KEY = "X"
#: The array of a ``--labels`` ``.npz`` file holding several, unless ``FILE.npz:key`` names another.
LABELS_KEY = "y"
#: File endings ``--network`` reads.
NETWORK_SUFFIXES = (".onnx", ".npz")


def load_network(path, option="--network"):
    """The network of ``path``: an ONNX file (``.onnx``) or a network saved by :meth:`~sheaflinalg.Network.save`.

    Parameters
    ----------
    path : str
    option : str
        The command-line option named in the errors.

    Returns
    -------
    Network

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Naming the file: another ending, a corrupt or crafted file, an ONNX model with operations the
        library cannot read (:class:`~sheaflinalg.network.errors.UnsupportedModelError`).

    Examples
    --------
    >>> import os, tempfile, sheaflinalg as sl
    >>> path = os.path.join(tempfile.mkdtemp(), "net.npz")
    >>> sl.Network.random([2, 3, 1], seed=0).save(path)
    >>> load_network(path).dims
    [2, 3, 1]
    >>> load_network("model.h5")
    Traceback (most recent call last):
    ...
    ValueError: --network model.h5: expected a .onnx or .npz file
    """
    from ..network.model import Network

    path = _network_file(path, option)
    suffix = os.path.splitext(path)[1].lower()
    try:
        return Network.from_onnx(path) if suffix == ".onnx" else Network.load(path)
    except ValueError as exc:       # its type is kept (UnsupportedModelError, FileFormatError, ...)
        if path not in str(exc):
            exc.args = (f"{option} {path}: {exc}",)
        raise


def load_inputs(path, labels=None, network=None):
    """The inputs of ``path`` (and the labels of ``labels``), validated; against ``network`` when given.

    Parameters
    ----------
    path : str
        ``X.npy``, ``X.npz`` (one array, or the array :data:`INPUTS_KEY`) or ``X.npz:key``.
    labels : str, optional
        ``y.npy``, ``y.npz`` (one array, or :data:`LABELS_KEY`) or ``y.npz:key``: integers, one per input;
        with ``network``, class indices in ``[0, n_outputs)`` (``0`` or ``1`` for a single output).
    network : Network, optional
        Check the inputs' shape against its input shape.

    Returns
    -------
    X : ndarray, float64
        Shape ``(M, n_inputs)`` (flattened in C order) with ``network``; else as stored, ``(M, ...)``.
    y : ndarray of int64, shape (M,), or None
        None without ``labels``.

    Raises
    ------
    FileNotFoundError, ValueError
        Naming the file: missing, another ending, corrupt or crafted, not numeric, NaN or infinite
        values, a shape that does not fit the network (the expected shape is named), labels that are not
        integers, not one per input or not a class of the network.

    Examples
    --------
    >>> import os, tempfile, numpy as np, sheaflinalg as sl
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "X.npy"), np.zeros((4, 2)))
    >>> np.save(os.path.join(d, "y.npy"), np.array([0, 1, 1, 0]))
    >>> X, y = load_inputs(os.path.join(d, "X.npy"), os.path.join(d, "y.npy"), sl.Network.random([2, 3, 2]))
    >>> X.shape, y.tolist()
    ((4, 2), [0, 1, 1, 0])
    """
    from .._common.memory import check_memory

    if labels is not None:
        _locate(labels, "--labels")             # a missing labels file is refused before the inputs are read
    X = _read_array(path, "--inputs", INPUTS_KEY, "inputs file")
    where = f"--inputs {path}"
    if X.dtype.kind not in "fiu":
        raise ValueError(f"{where}: the inputs must be numbers (float or integer), got dtype {X.dtype}")
    if X.ndim == 0 or X.shape[0] == 0 or X.size == 0:
        raise ValueError(f"{where}: the inputs must hold at least one input (one per row), got shape {X.shape}")
    check_memory(8 * X.size, f"{where}: the inputs as float64", "give fewer inputs")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{where}: the inputs hold NaN or infinite values")
    y = None if labels is None else _labels(labels, X.shape[0])
    return (X, y) if network is None else fit_network(X, y, network, path, labels)


def fit_network(X, y, network, path="X", labels="y"):
    """``(X, y)`` of :func:`load_inputs` (read without a network) checked against ``network``.

    ``X`` becomes ``(M, n_inputs)``; ``path`` and ``labels`` name the files in the errors.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> X, y = fit_network(np.zeros((2, 2)), np.array([1, 0]), sl.Network.random([2, 3, 2]))
    >>> fit_network(X, np.array([1, 2]), sl.Network.random([2, 3, 2]))
    Traceback (most recent call last):
    ...
    ValueError: --labels y: the labels must be classes in [0, 2) of a network with 2 outputs, got values in [1, 2]
    """
    X = _fit_shape(X, network, f"--inputs {path}")
    if y is not None:
        n_classes = max(network.n_outputs, 2)
        if y.min() < 0 or y.max() >= n_classes:
            raise ValueError(f"--labels {labels}: the labels must be classes in [0, {n_classes}) of a network "
                             f"with {network.n_outputs} output{'s' * (network.n_outputs > 1)}, got values in "
                             f"[{y.min()}, {y.max()}]")
    return X, y


def _require_file(path, option):
    if os.path.isdir(path):
        raise ValueError(f"{option} {path}: is a directory, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{option} {path}: no such file")


def _network_file(path, option):
    """``path`` as a string: an existing ``.onnx`` or ``.npz`` file."""
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() not in NETWORK_SUFFIXES:
        raise ValueError(f"{option} {path}: expected a {' or '.join(NETWORK_SUFFIXES)} file")
    _require_file(path, option)
    return path


def _split_key(text):
    """``("X.npz", "key")`` of ``"X.npz:key"``; ``(text, None)`` when no key is given."""
    head, sep, key = text.rpartition(":")
    if sep and head.lower().endswith(".npz") and key and os.sep not in key:
        return head, key
    return text, None


def _locate(text, option):
    """``(path, key, suffix)`` of ``--inputs``/``--labels`` ``text`` (``.npy``, ``.npz``, ``.npz:key``); an existing file."""
    path, key = _split_key(os.fspath(text))
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in (".npy", ".npz"):
        raise ValueError(f"{option} {text}: expected a .npy or .npz file (FILE.npz:key names one of its arrays)")
    _require_file(path, option)
    return path, key, suffix


def _read_array(text, option, default_key, what):
    """The one array of ``--inputs``/``--labels`` ``text``, read without pickle."""
    from .._common.npzfile import read_npy, read_npz

    path, key, suffix = _locate(text, option)
    if suffix == ".npy":
        return read_npy(path, what)
    f = read_npz(path, what)
    if key is None:
        key = next(iter(f.names)) if len(f.names) == 1 else default_key
    if key not in f:
        hint = "" if len(f.names) != 1 else " (or name none: the file's only array is read)"
        raise ValueError(f"{option} {text}: no array {key!r} in the file; it holds {sorted(f.names)}: name one "
                         f"as {path}:KEY{hint}")
    return f.raw(key)


def _fit_shape(X, network, where):
    """``X`` as ``(M, n_inputs)``: given as ``(M, *input_shape)`` or ``(M, n_inputs)``."""
    shape, n = tuple(network.input_shape), network.n_inputs
    if X.ndim == 1 and n == 1:
        X = X[:, None]
    if X.shape[1:] == shape or X.shape[1:] == (n,):
        return np.ascontiguousarray(X.reshape(X.shape[0], n))
    expected = f"(M, {n})" + ("" if len(shape) == 1 else f" or (M, {', '.join(map(str, shape))})")
    got = math.prod(X.shape[1:]) if X.ndim > 1 else 1
    raise ValueError(f"{where}: the inputs have shape {X.shape} ({got} value{'s' * (got != 1)} per input) but the "
                     f"network takes {n}: expected shape {expected}, M inputs")


def _labels(text, M):
    """The labels of ``--labels text``: ``M`` integers."""
    y = _read_array(text, "--labels", LABELS_KEY, "labels file")
    where = f"--labels {text}"
    if y.dtype.kind not in "iu":
        raise ValueError(f"{where}: the labels must be integers (class indices), got dtype {y.dtype}")
    if y.shape != (M,):
        raise ValueError(f"{where}: expected one label per input, shape ({M},), got shape {y.shape}")
    return y.astype(np.int64)


def label_targets(network, y):
    """The pinned output of labels ``y``: one-hot rows for several outputs, the label itself for one.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> label_targets(sl.Network.random([2, 3, 3]), np.array([2, 0])).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if network.n_outputs == 1:
        return np.asarray(y, dtype=np.float64)[:, None]
    return np.eye(network.n_outputs)[y]


# ----------------------------------------------------------------------------- command-line options
def add_input_options(parser, labels=None):
    """``--inputs`` (and ``--labels`` when ``labels``, its help text, is given) of a command.

    With ``--inputs`` a command's ``--samples`` (default None) takes the first inputs (all by default).
    """
    parser.add_argument("--inputs", metavar="X.npy|X.npz[:key]",
                        help="inputs of the network from a .npy or .npz file (no pickle; an .npz holding several "
                             f"arrays: the one named '{INPUTS_KEY}' or X.npz:key), shape (M, *input_shape) or "
                             "(M, n_inputs); integers such as uint8 images are read as float64")
    if labels:
        parser.add_argument("--labels", metavar="y.npy", help=labels)


def check_user_files(args):
    """Refuse, before any work, a ``--network``, ``--inputs`` or ``--labels`` file that is missing or of
    another kind (its ending), and inputs or labels that are bad in themselves (read here, before the
    network: ``args.user_arrays``, fitted to the network by :func:`inputs_from_args`)."""
    if getattr(args, "labels", None) and not args.inputs:
        raise ValueError("--labels needs --inputs (one label per input)")
    if getattr(args, "network", None):
        _network_file(args.network, "--network")
    for option in ("inputs", "labels"):
        if getattr(args, option, None):
            _locate(getattr(args, option), f"--{option}")
    if getattr(args, "inputs", None):
        args.user_arrays = load_inputs(args.inputs, getattr(args, "labels", None))


def inputs_from_args(args, network):
    """``(X, y)`` of ``--inputs``/``--labels`` checked against ``network``: the first ``--samples`` when given."""
    X, y = fit_network(*args.user_arrays, network, args.inputs, getattr(args, "labels", None))
    if args.samples is not None:
        X = X[:args.samples]
        y = None if y is None else y[:args.samples]
    return X, y
