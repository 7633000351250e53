"""``sheaflinalg verify``: certificates on a network and a batch of inputs."""

import numpy as np

from . import network_from_args

HELP = "certify det(delta_Omega) = 1 and harmonic extension = forward pass"


def add_arguments(parser):
    parser.add_argument("--arch", default="2,30,1",
                        help="layer widths of a He-initialised network (default: 2,30,1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the network and the inputs (default: 0)")
    parser.add_argument("--samples", type=int, default=50, help="number of inputs, uniform on [-2,2]^n0 (default: 50)")
    parser.add_argument("--network", metavar="FILE.npz", help="load this network instead of a random one")
    parser.add_argument("--output", default="identity",
                        help="output activation of the random network: identity, sigmoid, tanh, softmax")
    parser.add_argument("--backend", default="auto", choices=("auto", "cholmod", "superlu"),
                        help="sparse Cholesky backend (default: CHOLMOD if installed)")


def run(args):
    import sheaflinalg as sl

    net = network_from_args(args)
    rng = np.random.default_rng(args.seed)
    X = rng.uniform(-2.0, 2.0, size=(args.samples, net.dims[0]))
    report = sl.verify(net, X, backend=args.backend)
    print(report)
    return 0 if report.passed else 1
