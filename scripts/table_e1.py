"""Reproduce Table E.1 of the paper from the shipped inputs, and the learned-output figure of appendix E.2.

For each of the 8 configurations in ``data/table_e1/`` this replays the
recorded protocol (initial weights, data and initial stalks from the file)
with the sheaf dynamics and with the SGD baseline, checks every recorded
point of the file's curves (sheaf to 1e-8, SGD to 1e-6 relative), and writes

* ``table_e1.md``, ``table_e1.tex``, ``table_e1.csv``: final train/test losses
  and the sheaf/SGD test-loss ratio (the paper's "Ratio" column);
* ``table_e1_outputs.png``: target, sheaf output and SGD output per task
  (one hidden layer);
* ``table_e1_runs.json``: reproduction errors, wall times and the structural
  stagnation bound's records of every sheaf run.

Usage: ``python scripts/table_e1.py [--out results/table_e1] [--jobs 2] [--steps N] [--only NAME ...]
[--resume]``; ``--resume`` reuses the runs an interrupted invocation had finished.
Exit status 1 when a curve is not reproduced.
"""

import argparse
import json
import os
import sys
import time

from sheaflinalg._common.atomic import write_text
from sheaflinalg.reproduce.table_e1 import SGD_TOL, SHEAF_TOL, figure, run_all, tables


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/table_e1", help="output directory (default results/table_e1)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--steps", type=int, default=None,
                        help="Euler steps / SGD epochs per run (default: the file's protocol)")
    parser.add_argument("--only", nargs="*", default=None, help="configurations, e.g. paraboloid_1H")
    parser.add_argument("--no-figure", action="store_true", help="skip the learned-output figure")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the runs an earlier (possibly interrupted) invocation finished in OUT/runs/")
    args = parser.parse_args(argv)
    import sheaflinalg as sl

    names = args.only or list(sl.tasks.TABLE_E1)
    for n in names:
        if n not in sl.tasks.TABLE_E1:
            parser.error(f"unknown configuration {n!r}; expected one of {', '.join(sl.tasks.TABLE_E1)}")
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    if args.steps is not None and args.steps < 1000:
        parser.error("--steps must be >= 1000 (one epoch)")
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    t0 = time.perf_counter()
    results = run_all(names, args.steps, args.jobs, args.out, args.resume)
    total = time.perf_counter() - t0
    md, tex, csv_text = tables(results)
    for ext, text in (("md", md), ("tex", tex), ("csv", csv_text)):
        write_text(os.path.join(args.out, f"table_e1.{ext}"), text)
    runs = [{**r, "sheaf": {k: v for k, v in r["sheaf"].items() if k != "parameters"},
             "sgd": {k: v for k, v in r["sgd"].items() if k != "parameters"}} for r in results]
    write_text(os.path.join(args.out, "table_e1_runs.json"),
                 json.dumps({"total_seconds": total, "jobs": args.jobs, "runs": runs}, indent=1))
    print(md)
    ok = True
    for r in results:
        s_err, g_err = r["sheaf"]["max_rel_error"], r["sgd"]["max_rel_error"]
        good = s_err < SHEAF_TOL and g_err < SGD_TOL
        ok &= good
        print(f"{r['name']:>14}: sheaf max rel err {s_err:.2e} ({r['sheaf']['seconds']:.2f} s, reference "
              f"{r['reference_seconds']['sheaf']} s), SGD {g_err:.2e} ({r['sgd']['seconds']:.2f} s, reference "
              f"{r['reference_seconds']['sgd']} s) {'OK' if good else 'MISMATCH'}")
    print(f"all {len(results) * 2} runs: {total:.1f} s wall clock with {args.jobs} worker(s)")
    if not args.no_figure:
        print("figure:", figure(args.out, results))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
