"""``sheaflinalg verify``: certificates on a network and a batch of inputs."""

import numpy as np

from . import parse_arch

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

    if args.samples < 1:
        raise ValueError("--samples must be at least 1")
    if args.network:
        net = sl.Network.load(args.network)
    else:
        net = sl.Network.random(parse_arch(args.arch), seed=args.seed, output=args.output)
    rng = np.random.default_rng(args.seed)
    X = rng.uniform(-2.0, 2.0, size=(args.samples, net.dims[0]))
    report = sl.verify(net, X, backend=args.backend)
    print(report)
    return 0 if report.passed else 1
