"""``sheaflinalg discord``: the pinned-discord table of a network (paper table "per-edge pinned discord")."""

import numpy as np

from . import FIGURE_SUFFIXES, add_output, number, parse_arch, refuse_ignored

HELP = "pin a network's outputs to the labels and print the per-edge discord at equilibrium"
#: Defaults of the options that describe the network to train (refused with --network).
TRAINING_DEFAULTS = {"arch": "2,30,1", "method": "sheaf", "steps": 20_000}


def add_arguments(parser):
    parser.add_argument("--network", metavar="FILE.npz",
                        help="analyse this network (default: train one on --task with --arch)")
    parser.add_argument("--task", default="paraboloid", help="paraboloid, saddle, circular or blobs (default paraboloid)")
    parser.add_argument("--arch", default=None, help="widths of the network to train (default 2,30,1)")
    parser.add_argument("--method", default=None, choices=("sheaf", "sgd"), help="how to train it (default sheaf)")
    parser.add_argument("--steps", type=number("--steps", int, minimum=1), default=None,
                        help="training steps / epochs (default 20000)")
    parser.add_argument("--samples", type=number("--samples", int, minimum=1), default=50,
                        help="test inputs to pin (default 50)")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=0,
                        help="seed of the data and the network (default 0)")
    add_output(parser, "--plot", "FILE.png", "write the residual figure here (PNG, PDF or SVG)",
               suffixes=FIGURE_SUFFIXES)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args):
    import sheaflinalg as sl
    from ..network.model import check_network

    if args.network:
        refuse_ignored(args, {"--arch": "arch", "--method": "method", "--steps": "steps"},
                       "--network (the file fixes the network; nothing is trained)")
        net = check_network(sl.Network.load(args.network), f"--network {args.network}")
        data = sl.tasks.make(args.task, n_train=10, n_test=args.samples, seed=args.seed)
        if data.X_test.shape[1] != net.dims[0]:
            raise ValueError(f"--network takes {net.dims[0]} inputs but task {args.task!r} has "
                             f"{data.X_test.shape[1]}")
        source = args.network
    else:
        arch, method, steps = (TRAINING_DEFAULTS[k] if getattr(args, k) is None else getattr(args, k)
                               for k in ("arch", "method", "steps"))
        dims = parse_arch(arch)
        data = sl.tasks.make(args.task, n_train=300, n_test=args.samples, seed=args.seed)
        net = sl.Network.random(dims, seed=args.seed, output=data.output)
        fit = (sl.train(net, data.X_train, data.Y_train, steps=steps, seed=args.seed,
                        progress=not args.no_progress) if method == "sheaf" else
               sl.sgd(net, data.X_train, data.Y_train, epochs=steps, progress=not args.no_progress))
        net = fit.network
        source = f"{method}-trained {dims} on {args.task} ({steps} steps)"
    pd = sl.discord.pinned(net, data.X_test, data.Y_test)
    print(f"pinned discord of {source}, {data.X_test.shape[0]} test inputs, output pinned to the labels")
    print(pd.table())
    if args.plot:
        from ..plotting.discord import plot_residuals

        plot_residuals(pd, path=args.plot, title=source)
        print(f"figure: {args.plot}")
    return 0 if bool(np.all(pd.settled)) else 1
