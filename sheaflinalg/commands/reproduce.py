"""``sheaflinalg reproduce [ITEM ...] --out DIR [--quick] [--jobs N] [--resume]``: the paper's figures and tables.

Every item of :mod:`sheaflinalg.reproduce.registry` (``--list`` shows them) writes its figures (PNG
and PDF) and tables (Markdown, LaTeX, CSV) into ``DIR`` with an ``index.md`` beside the paper's
labels.  The exit status is 1 when a replay misses its record.
"""

from . import number

HELP = "regenerate the paper's figures and tables (and the library's case studies) into a directory"
RESUME = "finished items are kept: run the same command with --resume to continue"


def add_arguments(parser):
    parser.add_argument("items", nargs="*", metavar="ITEM",
                        help="items to run (default: every item; --list shows them)")
    parser.add_argument("--only", nargs="+", metavar="ITEM", help="the same as naming the items (at least one)")
    parser.add_argument("--out", default="results/paper", metavar="DIR",
                        help="output directory (default results/paper; created when missing)")
    parser.add_argument("--quick", action="store_true", help="small step counts: a test of the pipeline (minutes)")
    parser.add_argument("--jobs", type=number("--jobs", int, minimum=1), default=2,
                        help="worker processes of Table E.1 and the sweeps (default 2)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the items an earlier (possibly interrupted) run finished in DIR")
    parser.add_argument("--list", action="store_true", help="list the items and exit")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args):
    from ..reproduce.output import Outputs
    from ..reproduce.registry import ITEMS, not_reproduced, run_items, select

    if args.list:
        width = max(len(i.key) for i in ITEMS)
        for item in ITEMS:
            print(f"{item.key:<{width}}  {item.paper}: {item.title}")
        return 0
    if args.items and args.only:
        raise ValueError("name the items either as arguments or after --only, not both")
    items = select(args.only or args.items or None)
    Outputs(args.out, "--out")                      # checked (and created) before any work
    print(f"reproducing {len(items)} items in {'quick' if args.quick else 'full'} mode into {args.out}", flush=True)
    done = run_items(args.out, quick=args.quick, jobs=args.jobs, only=[i.key for i in items], resume=args.resume,
                     progress=not args.no_progress)
    print(f"index: {args.out}/index.md")
    missed = not_reproduced(done)
    if missed:
        print(f"not reproduced: {', '.join(missed)} (see the notes in the index)")
    return 1 if missed else 0
