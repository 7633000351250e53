"""Subcommands of the ``sheaflinalg`` command line; one module per subcommand (``cli.py`` dispatches).

The top layer: may import the package root (``import sheaflinalg as sl``) and any subpackage.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status); a command that can resume after Ctrl-C says how in
``RESUME`` (one line, printed by ``cli.main``).  Numeric options are checked when the
command line is parsed (:func:`number`); combinations that would silently
ignore an option are refused by :func:`refuse_ignored`.
"""

import argparse
import math

NAMES = ("verify", "heat", "train", "spectrum", "discord", "sweep", "reproduce")


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


def network_from_args(args):
    """The network of ``--network FILE.npz``, else a He-initialised ``--arch`` network.

    ``--arch`` and ``--output`` describe the random network: with ``--network`` they are refused.
    """
    from ..network.model import Network

    if args.network:
        refuse_ignored(args, {"--arch": "arch", "--output": "output"}, "--network (the file fixes the network)")
        return Network.load(args.network)
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
    parser.add_argument("--network", metavar="FILE.npz", help="load this network instead of a random one")
    parser.add_argument("--output", default=None, type=_output_activation,
                        help="output activation of the random network: identity, sigmoid, tanh, softmax "
                             "(default: identity)")
    parser.set_defaults(default_arch=default_arch)
