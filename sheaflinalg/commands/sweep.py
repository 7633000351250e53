"""``sheaflinalg sweep run | status | export | plot``: scripted parameter sweeps (see :mod:`sheaflinalg.sweep`)."""

import sys

HELP = "run a parameter sweep from a TOML file into an SQLite store; its status, CSV export and plots"
RESUME = "finished runs are kept in the store: run the same command again to continue"


def add_arguments(parser):
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("run", help="run every run of SPEC not yet done in --db")
    p.add_argument("spec", metavar="SPEC.toml")
    add_run_options(p, "runs")
    p = sub.add_parser("status", help="planned / done / failed / remaining runs per sweep")
    p.add_argument("db", metavar="FILE.db")
    p = sub.add_parser("export", help="one CSV row per run: parameters, metrics, status")
    p.add_argument("db", metavar="FILE.db")
    p.add_argument("--csv", required=True, metavar="FILE.csv")
    p = sub.add_parser("plot", help="a metric against a parameter, one line per value of another")
    p.add_argument("db", metavar="FILE.db")
    p.add_argument("--x", required=True, help="parameter on the x axis")
    p.add_argument("--y", required=True, help="metric on the y axis")
    p.add_argument("--hue", help="parameter that separates the lines")
    p.add_argument("--mark", type=float, help="dashed vertical line at this x")
    p.add_argument("--out", default="sweep.png", metavar="FILE.png", help="figure file (default sweep.png)")


def add_run_options(p, what):
    """``--db``, ``--jobs``, ``--scheduler``, ``--retry-failed`` and ``--no-progress`` of a ``run`` that computes
    ``what`` (``"runs"``, ``"inputs"``) into a sweep store (``sweep run``, ``survey run``)."""
    p.add_argument("--db", required=True, metavar="FILE.db", help="SQLite store (created when missing)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: every core)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run on this Dask scheduler instead")
    p.add_argument("--retry-failed", action="store_true", help=f"run again the {what} that failed")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def counts_line(counts, what):
    """The line that reports a run's counts (:func:`sheaflinalg.sweep.run`'s) of ``what`` (``"runs"``)."""
    elsewhere = f", {counts['elsewhere']} being run by another driver" if counts["elsewhere"] else ""
    return (f"{counts['planned']} {what} planned: {counts['done']} done now, {counts['failed']} failed now, "
            f"{counts['skipped']} kept from before{elsewhere}")


def run(args):
    from .. import sweep

    if args.action == "run":
        return _run(sweep, args)
    if args.action == "status":
        print(f"{'sweep':<24}{'function':<10}{'planned':>9}{'done':>7}{'failed':>8}{'running':>9}{'remaining':>11}")
        for s in sweep.status(args.db):
            print(f"{s['name']:<24}{s['function']:<10}{s['planned']:>9}{s['done']:>7}{s['failed']:>8}"
                  f"{s['running']:>9}{s['remaining']:>11}")
        return 0
    if args.action == "export":
        n = sweep.export_csv(args.db, args.csv)
        print(f"{n} runs written to {args.csv}")
        return 0
    from .._common.atomic import prepare_target, save_figure
    from ..plotting.sweep import plot_sweep

    prepare_target(args.out, "--out")
    flat = sweep.flatten(sweep.load(args.db, records=True))
    ax = plot_sweep(flat, args.x, args.y, hue=args.hue, mark=args.mark)
    try:
        save_figure(ax.figure, args.out, "--out", dpi=150, bbox_inches="tight")
    finally:
        import matplotlib.pyplot as plt

        plt.close(ax.figure)         # a command may run many times in one process (tests, scripts)
    print(f"figure: {args.out}")
    return 0


def _run(sweep, args):
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    try:
        counts = sweep.run(args.spec, args.db, jobs=args.jobs, scheduler=args.scheduler,
                           retry_failed=args.retry_failed, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"\nsheaflinalg sweep: interrupted; the finished runs are stored in {args.db}: run the same "
              "command again to resume", file=sys.stderr)
        return 130
    print(counts_line(counts, "runs"))
    return 0 if counts["failed"] == 0 else 1
