"""Subcommands of the ``sheaflinalg`` command line; one module per subcommand.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status).
"""

NAMES = ("verify", "heat", "train", "spectrum")
