"""Regenerate every figure and table of the paper's section 6 and appendix E.

Writes ``OUT/figures/*.png|pdf``, ``OUT/tables/*.md|tex|csv`` and ``OUT/index.md`` (each output
next to the paper's figure or table label).  Every finished item leaves a marker: with
``--resume`` an interrupted run keeps the finished items and redoes only the others (as
``scripts/table_e1.py --resume``).  ``--quick`` uses small step counts (about
a minute here); the full mode uses the paper's settings (about 3 minutes on 2 cores, most of it
the sweeps: beta scaling with three batch sizes, and the 16 runs of Table E.1).

Usage: ``python scripts/reproduce_all.py --out results/paper [--quick] [--jobs 2] [--only KEY ...] [--resume]``
"""

import argparse
import sys

from sheaflinalg.reproduce.registry import ITEMS, run_items


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/paper", help="output directory (default results/paper)")
    parser.add_argument("--quick", action="store_true", help="small step counts (a test of the pipeline)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for Table E.1 (default 2)")
    parser.add_argument("--only", nargs="*", choices=[i.key for i in ITEMS], help="run only these items")
    parser.add_argument("--resume", action="store_true",
                        help="keep the items an earlier (possibly interrupted) run finished in OUT")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    print(f"reproducing {len(args.only or ITEMS)} items in {'quick' if args.quick else 'full'} mode "
          f"into {args.out} ({'about a minute' if args.quick else 'about 3 minutes on 2 cores'})", flush=True)
    run_items(args.out, quick=args.quick, jobs=args.jobs, only=args.only, resume=args.resume,
              progress=not args.no_progress)
    print(f"index: {args.out}/index.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
