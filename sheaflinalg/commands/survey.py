"""``sheaflinalg survey run | status | export | plot``: the spectrum and the pinned discord of every input of a
data set under one network, one row per input in a sweep store (see :func:`sheaflinalg.survey`)."""

import sys

import numpy as np

from . import add_output, number, refuse_ignored
from .sweep import add_run_options, counts_line
from .user_inputs import add_input_options, check_user_files, fit_network, load_network

HELP = "spectrum and pinned discord of every input of a data set, one row per input in an SQLite store"
RESUME = "finished inputs are kept in the store: run the same command again to continue"


def add_arguments(parser):
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("run", help="compute every input not yet stored in --db")
    add_run_options(p, "inputs")
    p.add_argument("--network", metavar="FILE.onnx|FILE.npz",
                   help="an ONNX file or a saved network (default: the MNIST-1D CNN of the case study, trained or "
                        "kept in --case-dir)")
    add_input_options(p, labels="their true classes, one integer per input (y.npy, or y.npz[:key]; needed by the "
                                "discord)")
    p.add_argument("--case-dir", default="results/paper", metavar="DIR",
                   help="where the case study's network is kept (default: sheaflinalg reproduce's results/paper)")
    p.add_argument("--limit", type=number("--limit", int, minimum=1), help="only the first N inputs")
    p.add_argument("--name", default="survey", help="the survey's name in the store (default: survey)")
    p.add_argument("--no-spectrum", action="store_true", help="skip the spectra")
    p.add_argument("--no-discord", action="store_true", help="skip the pinned discord")
    p.add_argument("--max-iter", type=number("--max-iter", int, minimum=1), default=100,
                   help="pattern updates of a pinned equilibrium (default 100)")
    p = sub.add_parser("status", help="planned / done / failed / remaining inputs per survey")
    p.add_argument("db", metavar="FILE.db")
    p = sub.add_parser("export", help="one CSV row per input: index, label, metrics, status")
    p.add_argument("db", metavar="FILE.db")
    p.add_argument("--name", default="survey", help="the survey (default: survey)")
    add_output(p, "--csv", "FILE.csv", "the CSV file", (".csv",))
    p = sub.add_parser("plot", help="lambda_min, condition and discord by class and by outcome")
    p.add_argument("db", metavar="FILE.db")
    p.add_argument("--name", default="survey", help="the survey (default: survey)")
    add_output(p, "--out", "FILE.png", "figure file (default survey.png)", (".png", ".pdf", ".svg"))
    p.set_defaults(out="survey.png")


def run(args):
    from .. import sweep

    if args.action == "run":
        return _run(args)
    if args.action == "status":
        print(f"{'survey':<24}{'inputs':>9}{'done':>7}{'failed':>8}{'running':>9}{'remaining':>11}")
        for s in sweep.status(args.db):
            if s["function"] == "survey":
                print(f"{s['name']:<24}{s['planned']:>9}{s['done']:>7}{s['failed']:>8}{s['running']:>9}"
                      f"{s['remaining']:>11}")
        return 0
    if args.action == "export":
        _load(args)                       # a clear error for a store without this survey
        if args.csv is None:
            raise ValueError("--csv FILE.csv is required")
        n = sweep.export_csv(args.db, args.csv, sweep=args.name)
        print(f"{n} inputs written to {args.csv}")
        return 0
    return _plot(args)


def _load(args):
    from ..sweep.survey_result import SurveyResult

    return SurveyResult.load(args.db, args.name)


def _plot(args):
    from .._common.atomic import save_figure
    from ..plotting.survey import plot_survey

    fig = plot_survey(_load(args))
    save_figure(fig, args.out, "--out", dpi=150, bbox_inches="tight")
    print(f"figure: {args.out}")
    return 0


def _data(args):
    """``(network, X, labels)`` of the options: the files given, or the case study's network and test set."""
    if args.network is None:
        refuse_ignored(args, {"--inputs": "inputs", "--labels": "labels"}, "the case study's network (give --network)")
        from ..reproduce.case_mnist1d import case_network

        net, data = case_network(args.case_dir, progress=not args.no_progress)
        return net, data.X_test, data.Y_test.argmax(axis=1)
    if args.inputs is None:
        raise ValueError("--network needs --inputs X.npy|X.npz[:key] (one row per input)")
    check_user_files(args)                  # the inputs and labels read and checked before the network
    net = load_network(args.network)
    return (net, *fit_network(*args.user_arrays, net, args.inputs, args.labels))


def _run(args):
    from ..sweep.survey import survey

    net, X, labels = _data(args)
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    if args.limit is not None:
        X, labels = X[:args.limit], None if labels is None else labels[:args.limit]
    try:
        s = survey(net, X, labels, store=args.db, spectrum=not args.no_spectrum, discord=not args.no_discord,
                   jobs=args.jobs, scheduler=args.scheduler, name=args.name, max_iter=args.max_iter,
                   retry_failed=args.retry_failed, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"\nsheaflinalg survey: interrupted; the finished inputs are stored in {args.db}: run the same "
              "command again to resume", file=sys.stderr)
        return 130
    print(f"{counts_line(s.counts, 'inputs')}; {s.n_inputs} stored, accuracy {np.mean(s.correct):.3f}")
    return 0 if s.counts["failed"] == 0 else 1
