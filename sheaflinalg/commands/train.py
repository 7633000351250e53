"""``sheaflinalg train``: train a network on one of the paper's tasks (or replay a recorded experiment)."""

import csv

from .._common.atomic import atomic_file
from .._common.validation import check_choice
from . import add_output, number, parse_arch, refuse_ignored

HELP = "train a network by sheaf joint dynamics (or the SGD baseline) on a task or a recorded experiment"


def add_arguments(parser):
    parser.add_argument("--task", default=None, help="paraboloid, saddle, circular or blobs (default paraboloid)")
    parser.add_argument("--arch", default=None,
                        help="hidden widths and output, e.g. 2,30,1 (default: 2,30,1; 4 outputs for blobs)")
    parser.add_argument("--experiment", metavar="FILE.npz",
                        help="replay a recorded experiment (Table E.1 format, or a shipped one by name: "
                             "paraboloid_1H, ...) instead of --task/--arch")
    parser.add_argument("--method", default="sheaf", choices=("sheaf", "sgd"), help="default: sheaf")
    parser.add_argument("--steps", type=number("--steps", int, minimum=1), default=None,
                        help="Euler steps / SGD epochs (default 100000, or the experiment's)")
    parser.add_argument("--dt", type=number("--dt", positive=True), default=None, help="Euler step (default 0.005)")
    parser.add_argument("--alpha", type=number("--alpha", positive=True), default=None,
                        help="state rate (default 1)")
    parser.add_argument("--beta", type=number("--beta", positive=True), default=None,
                        help="weight rate (default 1/n_train)")
    parser.add_argument("--lr", type=number("--lr", positive=True), default=None,
                        help="SGD learning rate (default 0.005 / 0.01)")
    parser.add_argument("--loss", default=None, help="mse, l1, pnorm, huber, cross_entropy (default by output)")
    parser.add_argument("--loss-param", type=number("--loss-param"), default=None,
                        help="p of pnorm / tau of huber")
    parser.add_argument("--n-train", type=number("--n-train", int, minimum=1), default=None,
                        help="training samples (default 300)")
    parser.add_argument("--n-test", type=number("--n-test", int, minimum=1), default=None,
                        help="test samples (default 100)")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=None,
                        help="seed of data, weights and stalks (default 0)")
    add_output(parser, "--save", "NET.npz", "write the trained network here")
    add_output(parser, "--history", "HIST.csv", "write the per-epoch history here")
    add_output(parser, "--checkpoint", "RUN.npz",
               "sheaf runs: keep a checkpoint here every 10 epochs and resume from it if it exists")
    parser.add_argument("--threads", type=number("--threads", int, minimum=1), default=None,
                        help="threads of the sheaf training kernels (default: the cores this process may use; "
                             "SHEAFLINALG_NUM_THREADS lowers it)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def check_combinations(args):
    """Refuse options the chosen run would ignore (before any work)."""
    if args.method == "sgd":
        refuse_ignored(args, {"--checkpoint": "checkpoint", "--dt": "dt", "--alpha": "alpha", "--beta": "beta"},
                       "--method sgd (sheaf runs only)")
    else:
        refuse_ignored(args, {"--lr": "lr"}, "--method sheaf (the SGD learning rate)")
    if args.experiment:
        refuse_ignored(args, {"--task": "task", "--arch": "arch", "--n-train": "n_train", "--n-test": "n_test",
                              "--seed": "seed", "--dt": "dt", "--alpha": "alpha", "--beta": "beta", "--lr": "lr"},
                       "--experiment (the file fixes the data, the network and the protocol)")


def write_history(history, path):
    """Write the scalar per-record series of ``history`` as CSV (atomically)."""
    keys = ["epoch", "step", "train_loss", "test_loss", "train_accuracy", "test_accuracy", "discord",
            "weight_displacement", "state_norm", "wall_time"]
    with atomic_file(path, "w", name="--history") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for i in range(len(history)):
            w.writerow(["" if getattr(history, k)[i] is None else getattr(history, k)[i] for k in keys])


def run(args):
    import sheaflinalg as sl

    if args.threads is None:
        return _run(args)
    with sl.num_threads(args.threads):
        return _run(args)


def _run(args):
    import sheaflinalg as sl

    check_combinations(args)
    if args.task is not None:
        check_choice(args.task, sl.tasks.TASKS, "--task")
    progress = not args.no_progress
    if args.experiment:
        exp = sl.tasks.load_experiment(args.experiment)
        kwargs = {"loss": args.loss} if args.loss else {}
        if args.loss_param is not None:
            kwargs["loss_param"] = args.loss_param
        if args.checkpoint:
            kwargs["checkpoint"] = args.checkpoint
        net, hist = exp.fit(steps=args.steps, method=args.method, progress=progress, **kwargs)
        if exp.reference:
            print(f"max relative difference to the recorded {args.method} curves: "
                  f"{exp.max_relative_error(hist, args.method):.3e}")
    else:
        task = args.task or "paraboloid"
        seed = 0 if args.seed is None else args.seed
        data = sl.tasks.make(task, args.n_train or 300, args.n_test or 100, seed=seed)
        default = "2,30,4" if task == "blobs" else "2,30,1"
        net0 = sl.Network.random(parse_arch(args.arch or default), seed=seed, output=data.output)
        steps = 100_000 if args.steps is None else args.steps
        common = dict(loss=args.loss, loss_param=args.loss_param, progress=progress)
        if args.method == "sheaf":
            warm = data.output == "identity"
            fit = sl.train(net0, data.X_train, data.Y_train, data.X_test, data.Y_test,
                           alpha=1.0 if args.alpha is None else args.alpha, beta=args.beta,
                           dt=0.005 if args.dt is None else args.dt, steps=steps,
                           init="random" if warm else "forward", warm_start=warm, seed=seed,
                           checkpoint=args.checkpoint, **common)
        else:
            fit = sl.sgd(net0, data.X_train, data.Y_train, data.X_test, data.Y_test, lr=args.lr, epochs=steps,
                         **common)
        net, hist = fit
    last = -1
    acc = hist.test_accuracy[last] if hist.test_accuracy[last] is not None else hist.train_accuracy[last]
    print(f"{args.method}: {hist.step[last]} steps, train loss {hist.train_loss[last]:.6g}, "
          f"test loss {hist.test_loss[last] if hist.test_loss[last] is not None else float('nan'):.6g}"
          + (f", accuracy {acc:.3f}" if acc is not None else "") + f", {hist.wall_time[last]:.2f} s")
    if hist.diverged:
        print(hist.message)
    if args.history:
        write_history(hist, args.history)
    if args.save:
        net.save(args.save)
    return 1 if hist.diverged else 0
