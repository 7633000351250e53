"""The ``sheaflinalg`` command: ``sheaflinalg verify | heat | train | spectrum | discord | sweep | survey | reproduce | warmup``.

Errors are one line and exit status 2; Ctrl-C stops any command with one line (how to resume, for
the commands that can) and exit status 130, never a traceback.
"""

import argparse
import importlib
import sys

from ._common.interrupt import catching_interrupts, check_interrupt
from .commands import NAMES, check_outputs


def _available_commands():
    modules = {}
    for name in NAMES:
        try:
            modules[name] = importlib.import_module(f"sheaflinalg.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"sheaflinalg.commands.{name}":
                raise
    return modules


class UsageError(Exception):
    """A command-line usage error found by the parser (printed as one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit status 2 via :func:`main`."""

    def error(self, message):
        # "argument --dt: --dt must be ..." -> "--dt must be ..." (the option is already named).
        head, sep, rest = message.partition(": ")
        if head.startswith("argument ") and rest.startswith(head[len("argument "):].split("/")[0]):
            message = rest
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser():
    """The argument parser of the ``sheaflinalg`` command."""
    parser = _Parser(
        prog="sheaflinalg",
        description="Neural networks as cellular sheaves: exact linear algebra, heat-equation "
                    "inference, sheaf training and spectral diagnostics.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in _available_commands().items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _resume=getattr(module, "RESUME", None))
    return parser


INTERRUPTED = 130                     # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def main(argv=None):
    """Entry point; returns the process exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        check_outputs(args)
        with catching_interrupts():
            status = int(args._run(args) or 0)
            check_interrupt()     # a Ctrl-C whose exception a finaliser swallowed still counts
        return status
    except (ValueError, TypeError, OSError, MemoryError, ImportError) as exc:
        message = " ".join(str(exc).split())  # one line
        print(f"sheaflinalg {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every file is written atomically: what is complete stays, nothing is half-written.
        hint = args._resume or "files already complete are kept, nothing is half-written"
        print(f"\nsheaflinalg {args.command}: interrupted; {hint}", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
