"""``sheaflinalg spectrum``: spectral gap, lambda_max, condition number and eigenvector energies."""

import numpy as np

from . import FIGURE_SUFFIXES, add_network_options, add_output, network_from_args, number
from .user_inputs import add_input_options, inputs_from_args
from ..network.paths import GRAPH, engine

HELP = "spectral diagnostics of L[Omega,Omega]: lambda_1, lambda_max, condition number, eigenvector energy"


def add_arguments(parser):
    add_network_options(parser, "2,30,1")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=42,
                        help="seed of the network and of the inputs (default: 42, as in appendix E.3)")
    parser.add_argument("--samples", type=number("--samples", int, minimum=1), default=None,
                        help="number of inputs: the first paraboloid training inputs for 2 input "
                             "features, else uniform on [-2,2]^n0 (default: 50); with --inputs the first "
                             "ones (default: all)")
    add_input_options(parser)
    parser.add_argument("--system", default="reduced", choices=("reduced", "free"),
                        help="reduced Laplacian of appendix A, or the unreduced L[Omega,Omega] (default: reduced)")
    parser.add_argument("-k", type=number("-k", int, minimum=1), default=1, help="smallest and largest eigenpairs per input (default: 1)")
    parser.add_argument("--method", default="auto", choices=("auto", "dense", "arpack", "windows"),
                        help="auto: dense for small systems, ARPACK otherwise; windows: lambda_max of a large "
                             "image's graph network from windows of pixels (-k 1; docs/guide.md) (default: auto)")
    from ..spectral.drivers import TOL

    parser.add_argument("--tol", type=number("--tol", minimum=0.0), default=TOL, help=f"ARPACK relative tolerance (default: {TOL:g})")
    parser.add_argument("--per-sample", action="store_true", help="also print one line per input")
    add_output(parser, "--plot", "FILE.png", "write the spectra figure (spectra and eigenvector energy per block)",
               suffixes=FIGURE_SUFFIXES)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def inputs(n_features, samples, seed):
    """The first ``samples`` paraboloid training inputs (2 features), else uniform on [-2, 2]^n."""
    import sheaflinalg as sl

    if n_features == 2:
        return sl.tasks.paraboloid(samples, seed=seed)[0]
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=(samples, n_features))


def run(args):
    import sheaflinalg as sl

    from ..sheaf.layout import Layout
    from ..spectral.drivers import DENSE_MAX

    net = network_from_args(args, graphs=True)
    X = inputs_from_args(args, net)[0] if args.inputs else inputs(net.n_inputs, args.samples or 50, args.seed)
    N = Layout.for_network(net, reduced=args.system == "reduced").n_free
    full = bool(args.plot) and args.method not in ("arpack", "windows") and N <= DENSE_MAX
    res = sl.spectrum(net, X, k=args.k, system=args.system, method=args.method, tol=args.tol,
                      full=full, progress=not args.no_progress)
    what = (f"graph network of {len(net.graph.nodes)} nodes, input shape {net.input_shape}" if engine(net) == GRAPH
            else f"network {net.dims}")
    print(f"{what} ({net.output} output), {X.shape[0]} inputs, {args.system} system, "
          f"N = {N}, method {res.method}")
    print(res.table())
    if args.per_sample:
        print()
        print(f"{'input':>6}{'lambda_min':>14}{'lambda_max':>14}{'condition':>14}  dominant block (lambda_min)")
        E = res.block_energy("smallest")
        for s in range(res.n_samples):
            print(f"{s:>6}{res.lambda_min[s]:>14.6g}{res.lambda_max[s]:>14.6g}{res.condition[s]:>14.6g}  "
                  f"{res.block_names[int(np.argmax(E[s]))]}")
    if args.plot:
        from ..plotting.spectral import spectra_figure

        spectra_figure(res, args.plot)
        print(f"wrote {args.plot}")
    return 0
