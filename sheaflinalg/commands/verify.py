"""``sheaflinalg verify``: certificates on a network and a batch of inputs."""

import numpy as np

from . import add_network_options, network_from_args, number
from .user_inputs import add_input_options, inputs_from_args

HELP = ("certify det(delta_Omega) = 1 and harmonic extension = forward pass "
        "(exit status 0 PASSED, 1 FAILED, 3 INCONCLUSIVE)")


def add_arguments(parser):
    add_network_options(parser, "2,30,1")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=0,
                        help="seed of the network and the inputs (default: 0)")
    parser.add_argument("--samples", type=number("--samples", int, minimum=1), default=None,
                        help="number of inputs, uniform on [-2,2]^n_inputs (default: 50); with --inputs the "
                             "first ones (default: all)")
    add_input_options(parser)
    parser.add_argument("--backend", default="auto", choices=("auto", "cholmod", "superlu", "matrix-free"),
                        help="sparse Cholesky backend, or matrix-free: nothing assembled (default: CHOLMOD if "
                             "installed, matrix-free where the assembled system does not fit in memory)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args):
    import sheaflinalg as sl
    from ..sheaf.verification.verify import EXIT_STATUS

    net = network_from_args(args, graphs=True)
    if args.inputs:
        X, _ = inputs_from_args(args, net)
    else:
        X = np.random.default_rng(args.seed).uniform(-2.0, 2.0, size=(args.samples or 50, net.n_inputs))
    report = sl.verify(net, X, backend=args.backend, progress=not args.no_progress)
    print(report)
    return EXIT_STATUS[report.status]
