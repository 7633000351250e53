"""``sheaflinalg warmup``: compile every kernel into numba's on-disk cache ahead of its first use.

numba compiles a kernel at its first call and keeps the machine code in its cache (``cache=True``);
a fresh installation therefore pays the compilation on the first ``heat``, ``train`` or
``spectrum`` (tens of seconds; ``benchmarks/cold_start.py``). :func:`warm_up` runs every
compiled path once on tiny problems, on one thread and on the available cores (the parallel
kernels are compiled separately), so that the first call a user makes reads machine code from the
cache. ``scripts/setup.sh`` runs it once after installing. Nothing here changes results or the
user's settings: every call is an ordinary public call on throw-away data.
"""

import numpy as np

from .._common.progress import progress_iter
from .._common.threads import available_cores, num_threads


def _chain_workloads(sl):
    """The chain paths: certificates, Euler and exact heat, spectra, discord, the training methods."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(6, 2))
    net = sl.Network.random([2, 5, 5, 1], seed=0)
    soft = sl.Network.random([2, 5, 3], seed=0, output="softmax")
    Y = net.forward(X) + 0.1
    labels = np.eye(3)[rng.integers(0, 3, size=len(X))]
    return {
        "chain: verify": lambda: sl.verify(net, X),
        "chain: heat (Euler)": lambda: sl.heat(net, X, max_steps=50, progress=False),
        "chain: heat (exact)": lambda: sl.heat(net, X[:2], method="exact", progress=False),
        "chain: spectrum": lambda: sl.spectrum(net, X, progress=False),
        "chain: pinned discord": lambda: sl.discord.pinned(net, X, Y),
        "chain: train (joint dynamics)": lambda: sl.train(net, X, Y, steps=20, progress=False),
        "chain: train (equilibrium)": lambda: sl.train(soft, X, labels, method="equilibrium", epochs=1,
                                                       batch_size=3, progress=False),
        "chain: train (equilibrium, large nudging)": lambda: sl.train(soft, X, labels, method="equilibrium",
                                                                      epochs=1, batch_size=3, nudging=0.5,
                                                                      progress=False),
        "chain: train (imex)": lambda: sl.train(net, X, Y, method="imex", steps=5, progress=False),
        "chain: gradient descent": lambda: sl.sgd(net, X, Y, epochs=5, progress=False),
    }


def _graph_network(sl):
    """A small CNN with every compiled graph kernel: convolution, ReLU, batch norm, max and average pooling, a residual
    sum."""
    rng = np.random.default_rng(1)
    conv = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}
    pool = {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}
    return sl.Network.from_nodes((1, 8), [
        sl.Node("conv1", "conv", ["x"], conv, {"weight": rng.normal(0, 0.5, (3, 1, 3)), "bias": np.zeros(3)}),
        sl.Node("relu1", "relu", ["conv1"]),
        sl.Node("conv2", "conv", ["relu1"], conv, {"weight": rng.normal(0, 0.5, (3, 3, 3)), "bias": np.zeros(3)}),
        sl.Node("bn", "batchnorm", ["conv2"], params={"scale": np.ones(3), "shift": np.zeros(3)}),
        sl.Node("res", "add", ["bn", "relu1"]),
        sl.Node("max", "maxpool", ["res"], pool),
        sl.Node("avg", "avgpool", ["max"], {"kernel_size": 2, "stride": 2, "padding": 0, "ceil_mode": False,
                                            "count_include_pad": True}),
        sl.Node("flat", "reshape", ["avg"], {"shape": (6,)}),
        sl.Node("fc", "linear", ["flat"], params={"weight": rng.normal(0, 0.3, (3, 6)), "bias": np.zeros(3)}),
    ], output="softmax")


def _graph_workloads(sl):
    """The graph paths: the forward pass, heat, spectra, discord and training of a small CNN."""
    net = _graph_network(sl)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 8))
    labels = np.eye(3)[rng.integers(0, 3, size=len(X))]
    return {
        "graph: verify": lambda: sl.verify(net, X),
        "graph: heat": lambda: sl.heat(net, X, max_steps=50, progress=False),
        "graph: spectrum": lambda: sl.spectrum(net, X, progress=False),
        "graph: pinned discord": lambda: sl.discord.pinned(net, X, 0.5 * net.forward(X) + 0.5 / 3),
        "graph: train (joint dynamics)": lambda: sl.train(net, X, labels, steps=20, progress=False),
        "graph: train (equilibrium)": lambda: sl.train(net, X, labels, method="equilibrium", epochs=1,
                                                       batch_size=3, progress=False),
    }


def warm_up(progress=True):
    """Run every compiled path once on tiny problems, on one thread and on the available cores.

    Parameters
    ----------
    progress : bool
        Show a progress bar (one tick per workload and thread count).

    Returns
    -------
    list of str
        The workloads run, ``"<path> (<threads> threads)"``.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> from sheaflinalg.commands.warmup import warm_up
    >>> done = warm_up(progress=False)      # doctest: +SKIP
    """
    import sheaflinalg as sl

    workloads = {**_chain_workloads(sl), **_graph_workloads(sl)}
    counts = sorted({1, available_cores()})
    jobs = [(name, threads) for threads in counts for name in workloads]
    done = []
    for name, threads in progress_iter(jobs, len(jobs), progress, "compiling kernels"):
        with num_threads(threads):
            workloads[name]()
        done.append(f"{name} ({threads} threads)")
    return done


HELP = ("compile every kernel into numba's on-disk cache, so that the first heat, train or spectrum "
        "runs at full speed (scripts/setup.sh runs it once)")


def add_arguments(parser):
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar")


def run(args):
    import time

    start = time.perf_counter()
    done = warm_up(progress=args.progress)
    print(f"compiled the kernels of {len(done)} workloads in {time.perf_counter() - start:.1f} s")
    return 0
