"""``sheaflinalg train``: train a network on one of the paper's tasks (or replay a recorded experiment)."""

import csv

import numpy as np

from .._common.atomic import atomic_file
from .._common.validation import check_choice
from . import add_output, number, parse_arch, read_data, refuse_ignored

HELP = ("train a network by sheaf joint dynamics, at exact equilibria per mini-batch, or by the SGD baseline, "
        "on a task or a recorded experiment")


def add_arguments(parser):
    parser.add_argument("--task", default=None, help="paraboloid, saddle, circular or blobs (default paraboloid)")
    parser.add_argument("--arch", default=None,
                        help="hidden widths and output, e.g. 2,30,1 (default: 2,30,1; 4 outputs for blobs)")
    parser.add_argument("--experiment", metavar="FILE.npz",
                        help="replay a recorded experiment (Table E.1 format, or a shipped one by name: "
                             "paraboloid_1H, ...) instead of --task/--arch")
    parser.add_argument("--network", metavar="FILE.npz",
                        help="start from this network (a chain or a graph network saved with Network.save) "
                             "instead of a random --arch one")
    parser.add_argument("--data", metavar="FILE.npz",
                        help="train on the arrays X_train, Y_train (and optionally X_test, Y_test) of this file, "
                             "rows are samples, instead of --task (needs --network)")
    parser.add_argument("--method", default="sheaf", choices=("sheaf", "sgd", "equilibrium"),
                        help="sheaf: the paper's joint dynamics (default); equilibrium: exact equilibria per "
                             "mini-batch and an optimiser; sgd: full-batch gradient descent")
    parser.add_argument("--steps", type=number("--steps", int, minimum=1), default=None,
                        help="Euler steps / SGD epochs (default 100000, or the experiment's)")
    parser.add_argument("--dt", type=number("--dt", positive=True), default=None, help="Euler step (default 0.005)")
    parser.add_argument("--alpha", type=number("--alpha", positive=True), default=None,
                        help="state rate (default 1)")
    parser.add_argument("--beta", type=number("--beta", positive=True), default=None,
                        help="weight rate (default 1/n_train)")
    parser.add_argument("--lr", type=number("--lr", positive=True), default=None,
                        help="learning rate of sgd (default 0.005 / 0.01) or equilibrium (default: the optimiser's)")
    parser.add_argument("--epochs", type=number("--epochs", int, minimum=1), default=None,
                        help="equilibrium: passes over the data (default 100)")
    parser.add_argument("--batch-size", type=number("--batch-size", int, minimum=1), default=None,
                        help="equilibrium: samples per mini-batch (default 100, or all when fewer)")
    parser.add_argument("--optimizer", default=None,
                        help="equilibrium: sgd, momentum, nesterov, adam or adamw (default adam)")
    parser.add_argument("--schedule", default=None,
                        help="equilibrium: constant, step, exponential or cosine (default constant)")
    parser.add_argument("--nudging", type=number("--nudging", positive=True), default=None,
                        help="equilibrium: weight of the output edge's loss in the equilibrium (default 1e-6)")
    parser.add_argument("--symmetric", action="store_true",
                        help="equilibrium: average the gradients at +nudging and -nudging")
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


#: Options of --method equilibrium only (option -> dest).
EQUILIBRIUM_ONLY = {"--epochs": "epochs", "--batch-size": "batch_size", "--optimizer": "optimizer",
                    "--schedule": "schedule", "--nudging": "nudging", "--symmetric": "symmetric"}


def check_combinations(args):
    """Refuse options the chosen run would ignore (before any work)."""
    if args.method != "equilibrium":
        refuse_ignored(args, EQUILIBRIUM_ONLY, f"--method {args.method} (--method equilibrium only)")
    if args.method == "sgd":
        refuse_ignored(args, {"--checkpoint": "checkpoint", "--dt": "dt", "--alpha": "alpha", "--beta": "beta"},
                       "--method sgd (sheaf runs only)")
    elif args.method == "equilibrium":
        refuse_ignored(args, {"--steps": "steps", "--dt": "dt", "--alpha": "alpha", "--beta": "beta"},
                       "--method equilibrium (Euler runs only; --epochs sets the length)")
        refuse_ignored(args, {"--experiment": "experiment"}, "--method equilibrium (recorded experiments replay "
                       "the sheaf and sgd runs)")
    else:
        refuse_ignored(args, {"--lr": "lr"}, "--method sheaf (the SGD and equilibrium learning rate)")
    if args.network:
        refuse_ignored(args, {"--arch": "arch"}, "--network (the file fixes the network)")
    if args.data:
        if not args.network:
            raise ValueError("--data needs --network FILE.npz (the network that takes those inputs)")
        refuse_ignored(args, {"--task": "task", "--n-train": "n_train", "--n-test": "n_test"},
                       "--data (the file fixes the data)")
    if args.experiment:
        refuse_ignored(args, {"--network": "network", "--data": "data"}, "--experiment (the file fixes the network "
                       "and the data)")
        refuse_ignored(args, {"--task": "task", "--arch": "arch", "--n-train": "n_train", "--n-test": "n_test",
                              "--seed": "seed", "--dt": "dt", "--alpha": "alpha", "--beta": "beta", "--lr": "lr"},
                       "--experiment (the file fixes the data, the network and the protocol)")


def write_history(history, path):
    """Write the scalar per-record series of ``history`` as CSV (atomically)."""
    keys = ["epoch", "step", "train_loss", "test_loss", "train_accuracy", "test_accuracy", "discord",
            "weight_displacement", "state_norm", "wall_time"]
    if history.method == "equilibrium":
        keys += ["settle_iterations", "unsettled", "sliding", "decided"]
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
        net, hist = _fit(args, progress)
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


def _fit(args, progress):
    """Train the network of ``--network``/``--arch`` on ``--data``/``--task``; returns ``(network, history)``."""
    import sheaflinalg as sl

    seed = 0 if args.seed is None else args.seed
    data, net0 = _data_and_network(args, seed)
    steps = 100_000 if args.steps is None else args.steps
    common = dict(loss=args.loss, loss_param=args.loss_param, progress=progress)
    if args.method == "equilibrium":
        given = {dest: getattr(args, dest) for dest in list(EQUILIBRIUM_ONLY.values()) + ["lr"]
                 if getattr(args, dest) not in (None, False)}
        return sl.train(net0, data.X_train, data.Y_train, data.X_test, data.Y_test, method="equilibrium", seed=seed,
                        checkpoint=args.checkpoint, **given, **common)
    if args.method == "sheaf":
        warm = net0.output == "identity"
        return sl.train(net0, data.X_train, data.Y_train, data.X_test, data.Y_test,
                        alpha=1.0 if args.alpha is None else args.alpha, beta=args.beta,
                        dt=0.005 if args.dt is None else args.dt, steps=steps,
                        init="random" if warm else "forward", warm_start=warm, seed=seed,
                        checkpoint=args.checkpoint, **common)
    return sl.sgd(net0, data.X_train, data.Y_train, data.X_test, data.Y_test, lr=args.lr, epochs=steps, **common)


def _data_and_network(args, seed):
    """``(data, initial network)``: data with ``X_train, Y_train, X_test, Y_test`` from ``--data`` or a task."""
    import sheaflinalg as sl
    from ..network.model import check_network

    if args.data:
        data = read_data(args.data)
    else:
        task = args.task or "paraboloid"
        data = sl.tasks.make(task, args.n_train or 300, args.n_test or 100, seed=seed)
    if not args.network:
        default = "2,30,4" if (args.task or "paraboloid") == "blobs" else "2,30,1"
        return data, sl.Network.random(parse_arch(args.arch or default), seed=seed, output=data.output)
    net = check_network(sl.Network.load(args.network), f"--network {args.network}", graphs=True)
    n_given = int(np.prod(data.X_train.shape[1:]))
    if n_given != net.n_inputs:
        where = f"--data {args.data}" if args.data else f"task {args.task or 'paraboloid'!r}"
        raise ValueError(f"--network {args.network} takes {net.n_inputs} inputs (shape {net.input_shape}) but "
                         f"{where} has {n_given} per sample")
    return data, net
