"""Subcommands of the ``sheaflinalg`` command line; one module per subcommand (``cli.py`` dispatches).

The top layer: may import the package root (``import sheaflinalg as sl``) and any subpackage.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status).
"""

NAMES = ("verify", "heat", "train", "spectrum", "discord", "sweep")


def parse_arch(text):
    """Parse ``--arch`` (comma-separated layer widths such as ``2,30,1``)."""
    try:
        dims = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise ValueError(f"--arch must be comma-separated integers like 2,30,1, got {text!r}") from None
    if len(dims) < 2 or min(dims) < 1:
        raise ValueError(f"--arch needs at least two positive widths, got {text!r}")
    return dims


def network_from_args(args):
    """The network of ``--network FILE.npz``, else a He-initialised ``--arch`` network.

    Also checks ``--samples`` (at least 1) before any work.
    """
    from ..network.model import Network

    if args.samples < 1:
        raise ValueError("--samples must be at least 1")
    if args.network:
        return Network.load(args.network)
    return Network.random(parse_arch(args.arch), seed=args.seed, output=args.output)
