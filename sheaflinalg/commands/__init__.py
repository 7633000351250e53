"""Subcommands of the ``sheaflinalg`` command line; one module per subcommand (``cli.py`` dispatches).

The top layer: may import the package root (``import sheaflinalg as sl``) and any subpackage.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status); a command that can resume after Ctrl-C says how in
``RESUME`` (one line, printed by ``cli.main``).  Numeric options are checked when the
command line is parsed (:func:`number`); combinations that would silently
ignore an option are refused by :func:`refuse_ignored`; options naming a file
the command writes are declared with :func:`add_output`, and ``cli.main``
checks every such place with :func:`check_outputs` before the command runs.
"""

import argparse
import math
from types import SimpleNamespace

import numpy as np

NAMES = ("verify", "heat", "train", "spectrum", "discord", "sweep", "survey", "reproduce", "warmup")
#: File endings of figures (matplotlib picks the format from the ending).
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def number(option, kind=float, minimum=None, positive=False):
    """An argparse ``type`` for ``option``: a finite ``kind`` (int or float), ``>= minimum`` or ``> 0``.

    The error message starts with the option's name (``--dt must be ...``).

    Examples
    --------
    >>> number("--dt", positive=True)("0.01")
    0.01
    >>> number("--steps", int, minimum=1)("2.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --steps must be an integer >= 1, got '2.5'
    """
    if kind is int:
        want = f"an integer >= {minimum}" if minimum is not None else "an integer"
    else:
        want = ("a finite number > 0" if positive else
                f"a finite number >= {minimum:g}" if minimum is not None else "a finite number")

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or (minimum is not None and value < minimum) \
                or (positive and value <= 0):
            raise argparse.ArgumentTypeError(f"{option} must be {want}, got {text!r}")
        return value

    parse.__name__ = option  # argparse names the type in some messages
    return parse


def refuse_ignored(args, options, reason):
    """Raise ValueError if any of ``options`` (``{"--lr": "lr"}``, option -> dest) was given: ``reason`` ignores it."""
    given = [opt for opt, dest in options.items() if getattr(args, dest) not in (None, False, [])]
    if given:
        raise ValueError(f"{given[0]} has no effect with {reason}; drop it")


def add_output(parser, option, metavar, help, suffixes=()):
    """Add ``option``, a file the command writes; :func:`check_outputs` checks it before any work.

    Parameters
    ----------
    suffixes : tuple of str
        Accepted file name endings (case-insensitive), e.g. ``(".png", ".pdf", ".svg")``; empty: any.
    """
    parser.add_argument(option, metavar=metavar, help=help)
    outputs = dict(parser.get_default("_outputs") or {})
    outputs[option.lstrip("-").replace("-", "_")] = (option, tuple(suffixes))
    parser.set_defaults(_outputs=outputs)


def check_outputs(args):
    """Refuse, before the command runs, every output option given whose file cannot be written.

    Checks the file name's ending and its place (:func:`~sheaflinalg._common.atomic.prepare_target`:
    an existing, writable directory; not a directory itself).

    Examples
    --------
    >>> check_outputs(argparse.Namespace(plot="/no/such/dir/r.png", _outputs={"plot": ("--plot", (".png",))}))
    Traceback (most recent call last):
    ...
    ValueError: --plot: cannot write '/no/such/dir/r.png': directory '/no/such/dir' does not exist
    """
    from .._common.atomic import prepare_target

    for dest, (option, suffixes) in getattr(args, "_outputs", {}).items():
        path = getattr(args, dest)
        if path is None:
            continue
        if suffixes and not path.lower().endswith(suffixes):
            raise ValueError(f"{option} needs a {', '.join(suffixes)} file name, got {path!r}")
        prepare_target(path, option)


def parse_arch(text):
    """Parse ``--arch`` (comma-separated layer widths such as ``2,30,1``).

    Examples
    --------
    >>> parse_arch("2, 30,1")
    [2, 30, 1]
    """
    items = text.replace(" ", "").split(",")
    try:
        if "" in items:
            raise ValueError
        dims = [int(t) for t in items]
    except ValueError:
        raise ValueError(f"--arch must be comma-separated integers like 2,30,1 (no empty entries), "
                         f"got {text!r}") from None
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(f"--arch needs at least two positive widths, got {text!r}")
    return dims


def network_from_args(args, graphs=False):
    """The network of ``--network FILE.onnx|FILE.npz``, else a He-initialised ``--arch`` network.

    ``--arch`` and ``--output`` describe the random network: with ``--network`` they are refused.
    A graph network file is refused (:class:`~sheaflinalg.network.errors.GraphNetworkError`) unless
    the command takes graph networks (``graphs``).  The files are read by
    :func:`~sheaflinalg.commands.user_inputs.load_network`; ``--inputs`` and ``--labels``, when the
    command has them, are checked first (:func:`~sheaflinalg.commands.user_inputs.check_user_files`).
    """
    from ..network.model import Network, check_network
    from .user_inputs import check_user_files, load_network

    if args.network:
        refuse_ignored(args, {"--arch": "arch", "--output": "output"}, "--network (the file fixes the network)")
    check_user_files(args)          # --network, --inputs, --labels: present and of their kind, before any work
    if args.network:
        return check_network(load_network(args.network), f"--network {args.network}", graphs=graphs)
    arch = args.arch if args.arch is not None else args.default_arch
    return Network.random(parse_arch(arch), seed=args.seed, output=args.output or "identity")


def _output_activation(text):
    from ..network.activations import OUTPUTS

    if text not in OUTPUTS:
        raise argparse.ArgumentTypeError(f"--output: unknown output activation {text!r}; expected one of "
                                         f"{', '.join(OUTPUTS)}")
    return text


def add_network_options(parser, default_arch):
    """``--arch``, ``--network`` and ``--output`` (the last one only for the random network)."""
    parser.add_argument("--arch", default=None,
                        help=f"layer widths of a He-initialised network (default: {default_arch})")
    parser.add_argument("--network", metavar="FILE.onnx|FILE.npz",
                        help="load this network instead of a random one: an ONNX model or a network saved by "
                             "sheaflinalg (Network.save)")
    parser.add_argument("--output", default=None, type=_output_activation,
                        help="output activation of the random network: identity, sigmoid, tanh, softmax "
                             "(default: identity)")
    parser.set_defaults(default_arch=default_arch)


def read_data(path):
    """The data of ``--data FILE.npz``: ``X_train``, ``Y_train`` and optionally ``X_test``, ``Y_test``.

    One format for every command (``train`` fits the training arrays, ``discord`` pins the test
    arrays when there are some).  The arrays are checked against the network by the functions
    they go to; here: present, numeric, finite, at least one sample; read without pickle.
    """
    from .._common.npzfile import read_npz

    f = read_npz(path, "data file")
    f.require(["X_train", "Y_train"])
    if ("X_test" in f) != ("Y_test" in f):
        raise f.error("holds only one of X_test and Y_test: give both or neither")
    f.ignore_others(["X_train", "Y_train", "X_test", "Y_test"])
    arrays = {}
    for name in ("X_train", "Y_train", "X_test", "Y_test"):
        if name in f:
            a = f.raw(name)
            if a.dtype.kind not in "fiu" or a.ndim == 0 or a.shape[0] == 0 or not np.all(np.isfinite(a)):
                raise f.error(f"must be a non-empty numeric array with one row per sample and no NaN or "
                              f"infinity, got dtype {a.dtype}, shape {a.shape}", name)
            arrays[name] = a
    return SimpleNamespace(X_train=arrays["X_train"], Y_train=arrays["Y_train"], X_test=arrays.get("X_test"),
                           Y_test=arrays.get("Y_test"))
