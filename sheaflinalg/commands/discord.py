"""``sheaflinalg discord``: the pinned-discord table of a network (paper table "per-edge pinned discord").

A graph network file (``--network``) takes its inputs and labels from ``--data FILE.npz`` (the data
file of every command: ``X_train``, ``Y_train``, optionally ``X_test``, ``Y_test``; the test arrays are
pinned when there are some) and prints one row per node.
"""

import numpy as np

from . import FIGURE_SUFFIXES, add_output, number, parse_arch, read_data, refuse_ignored
from .user_inputs import add_input_options, check_user_files, inputs_from_args, label_targets, load_network
from ..network.paths import GRAPH, engine

HELP = "pin a network's outputs to the labels and print the per-edge discord at equilibrium"
#: Defaults of the options that describe the network to train (refused with --network).
TRAINING_DEFAULTS = {"arch": "2,30,1", "method": "sheaf", "steps": 20_000}


def add_arguments(parser):
    parser.add_argument("--network", metavar="FILE.onnx|FILE.npz",
                        help="analyse this network, an ONNX model or a network saved by sheaflinalg (default: "
                             "train one on --task with --arch)")
    parser.add_argument("--data", metavar="FILE.npz",
                        help="inputs and labels of --network: arrays X_test, Y_test (or X_train, Y_train when there are "
                             "no test arrays), inputs (n_samples, *input_shape) (a graph network needs this or --inputs; "
                             "default: the test inputs of --task)")
    add_input_options(parser, labels="the labels of --inputs (.npy, or y.npz[:key], default key 'y'): one "
                                     "integer class per input, the pinned output (one-hot for several outputs, "
                                     "the label itself for one)")
    parser.add_argument("--task", default=None, help="paraboloid, saddle, circular or blobs (default paraboloid)")
    parser.add_argument("--arch", default=None, help="widths of the network to train (default 2,30,1)")
    parser.add_argument("--method", default=None, choices=("sheaf", "sgd"), help="how to train it (default sheaf)")
    parser.add_argument("--steps", type=number("--steps", int, minimum=1), default=None,
                        help="training steps / epochs (default 20000)")
    parser.add_argument("--samples", type=number("--samples", int, minimum=1), default=50,
                        help="test inputs to pin (default 50; with --data or --inputs the first ones)")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=0,
                        help="seed of the data and the network (default 0)")
    add_output(parser, "--plot", "FILE.png", "write the residual figure here (PNG, PDF or SVG)",
               suffixes=FIGURE_SUFFIXES)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args):
    import sheaflinalg as sl
    from ..network.model import check_network

    for option in ("data", "inputs", "labels"):
        if getattr(args, option) and not args.network:
            raise ValueError(f"--{option} has no effect without --network (a network trained here uses --task); "
                             "drop it")
    if args.inputs and (args.data or not args.labels):
        raise ValueError("--inputs needs --labels (the outputs are pinned to them) and no --data")
    task = args.task or "paraboloid"
    if args.network:
        refuse_ignored(args, {"--arch": "arch", "--method": "method", "--steps": "steps"},
                       "--network (the file fixes the network; nothing is trained)")
        check_user_files(args)
        net = check_network(load_network(args.network), f"--network {args.network}", graphs=True)
        source = args.network
        if args.inputs:
            refuse_ignored(args, {"--task": "task"}, "--inputs (the files hold the inputs and labels)")
            X, y = inputs_from_args(args, net)
            Y = label_targets(net, y)
        elif args.data:
            refuse_ignored(args, {"--task": "task"}, "--data (the file holds the inputs and labels)")
            data = read_data(args.data)
            X, Y = (data.X_train, data.Y_train) if data.X_test is None else (data.X_test, data.Y_test)
            X, Y = X[:args.samples], Y[:args.samples]
        elif engine(net) == GRAPH:
            raise ValueError(f"--network {args.network} is a graph network (input shape {net.input_shape}): give "
                             "its inputs and labels with --data FILE.npz or --inputs X.npy --labels y.npy; the "
                             "tasks are 2-D")
        else:
            data = sl.tasks.make(task, n_train=10, n_test=args.samples, seed=args.seed)
            if data.X_test.shape[1] != net.dims[0]:
                raise ValueError(f"--network takes {net.dims[0]} inputs but task {task!r} has "
                                 f"{data.X_test.shape[1]}")
            X, Y = data.X_test, data.Y_test
    else:
        arch, method, steps = (TRAINING_DEFAULTS[k] if getattr(args, k) is None else getattr(args, k)
                               for k in ("arch", "method", "steps"))
        dims = parse_arch(arch)
        data = sl.tasks.make(task, n_train=300, n_test=args.samples, seed=args.seed)
        net = sl.Network.random(dims, seed=args.seed, output=data.output)
        fit = (sl.train(net, data.X_train, data.Y_train, steps=steps, seed=args.seed,
                        progress=not args.no_progress) if method == "sheaf" else
               sl.sgd(net, data.X_train, data.Y_train, epochs=steps, progress=not args.no_progress))
        net = fit.network
        source = f"{method}-trained {dims} on {task} ({steps} steps)"
        X, Y = data.X_test, data.Y_test
    pd = sl.discord.pinned(net, X, Y)
    print(f"pinned discord of {source}, {len(X)} {'inputs' if args.data or args.inputs else 'test inputs'}, output pinned to "
          "the labels")
    print(pd.table())
    if args.plot:
        from ..plotting.discord import plot_node_discord, plot_residuals

        (plot_node_discord if engine(net) == GRAPH else plot_residuals)(pd, path=args.plot, title=source)
        print(f"figure: {args.plot}")
    return 0 if bool(np.all(pd.settled)) else 1
