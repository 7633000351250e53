"""The engine's speed at two revisions in one run: did a redesign move it?  Prints a table, asserts nothing.

Every workload is timed in a fresh child process per revision (``PYTHONPATH`` pointing at an exported
copy of that revision, so each imports its own package), the two revisions alternating round by round
so that a busy machine slows both alike; a warm-up call first (numba's cache, imports); the median of
``--runs`` calls is the figure, and the ratio after / before is the claim.  Each call's wall time and the
CPU time of its process (all its threads, ``time.process_time``) are both printed: on a loaded machine
the CPU time is the one to read.

Workloads (the chain kernels and the graph walkers a redesign of the ops touches):

* chain: the heat equation (Euler, [2, 30, 1], 50 inputs, to tol 1e-12), the joint dynamics
  (``sl.train``, 2000 Euler steps), gradient descent (``sl.sgd``, 2000 steps), the spectrum
  ([20, 100, 100, 1], 20 inputs), the harmonic extension ([784, 256, 256, 10], 1000 inputs);
* graph: the harmonic extension of the MNIST-1D CNN (batch 1000), ResNet-20 (batch 16) and ResNet-50
  (batch 8 of 3x224x224), heat steps of the CNN (20 steps, 50 inputs), its spectrum (3 inputs) and its
  training at equilibrium (one epoch of 200 samples).

Run: ``.venv/bin/python benchmarks/before_after.py [--before REV] [--after REV|worktree] [--runs 5]``
(the default compares the commit before the op registry, 53f5f68, with the work tree).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEFORE = "53f5f68"


def _chain_setup(name):
    import numpy as np

    import sheaflinalg as sl

    rng = np.random.default_rng(0)
    if name == "chain_heat":
        net, X = sl.Network.random([2, 30, 1], seed=0), rng.uniform(-2, 2, (50, 2))
        return lambda: sl.heat(net, X, dt=0.01, tol=1e-12, seed=1, progress=False)
    if name in ("chain_train", "chain_sgd"):
        net, X = sl.Network.random([4, 32, 32, 1], seed=0), rng.normal(size=(64, 4))
        Y = np.sin(X.sum(axis=1, keepdims=True))
        if name == "chain_train":
            return lambda: sl.train(net, X, Y, steps=2000, seed=0, stagnation=False, progress=False)
        return lambda: sl.sgd(net, X, Y, epochs=2000, progress=False)
    if name == "chain_spectrum":
        net, X = sl.Network.random([20, 100, 100, 1], seed=0), rng.normal(size=(20, 20))
        return lambda: sl.spectrum(net, X, progress=False)
    net, X = sl.Network.random([784, 256, 256, 10], seed=0), rng.normal(size=(1000, 784))
    return lambda: sl.harmonic_extension(net, X)


def _graph_setup(name):
    import numpy as np

    import sheaflinalg as sl

    sys.path.insert(0, HERE)
    from graph_forward import build

    if name in ("graph_forward_resnet20", "graph_forward_resnet50"):
        _, net, X = build(name.rsplit("_", 1)[1])
        return lambda: net.evaluate(X)
    _, net, X = build("mnist1d_cnn", batch=1000 if name == "graph_forward_cnn" else 200)
    if name == "graph_forward_cnn":
        return lambda: net.evaluate(X)
    if name == "graph_heat_cnn":
        return lambda: sl.heat(net, X[:50], dt=0.01, max_steps=20, tol=0.0, crossings=False, progress=False)
    if name == "graph_spectrum_cnn":
        return lambda: sl.spectrum(net, X[:3], progress=False)
    y = np.random.default_rng(2).integers(0, 10, X.shape[0])
    soft = net.replace(output="softmax") if hasattr(net, "replace") and not net.is_graph else sl.Network.from_graph(
        sl.network.graph.Graph(net.input_shape, net.graph.nodes, "softmax"))
    return lambda: sl.train(soft, X.reshape(X.shape[0], -1), y, method="equilibrium", epochs=1, batch_size=100,
                            seed=0, progress=False)


WORKLOADS = ("chain_heat", "chain_train", "chain_sgd", "chain_spectrum", "chain_harmonic", "graph_forward_cnn",
             "graph_forward_resnet20", "graph_heat_cnn", "graph_spectrum_cnn", "graph_train_cnn",
             "graph_forward_resnet50")


def child(name, runs):
    """Time ``runs`` calls of one workload after a warm-up; print the seconds as JSON."""
    fn = (_chain_setup if name.startswith("chain") else _graph_setup)(name)
    fn()
    times = []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - t, time.process_time() - c))
    print(json.dumps(times))


def export(rev, into):
    """The package of revision ``rev`` (``worktree``: this checkout as it is) as a directory for PYTHONPATH."""
    if rev == "worktree":
        return ROOT
    path = os.path.join(into, rev)
    os.makedirs(path)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "sheaflinalg"], check=True, capture_output=True)
    with tarfile.open(fileobj=__import__("io").BytesIO(archive.stdout)) as tar:
        tar.extractall(path, filter="data")
    return path


def measure(path, name, runs):
    env = dict(os.environ, PYTHONPATH=path)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--runs", str(runs)],
                         env=env, cwd=path, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--after", default="worktree")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="alternating child processes per revision")
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"before": export(args.before, tmp), "after": export(args.after, tmp)}
        print(f"before = {args.before}, after = {args.after}; median of {args.runs} calls x {args.rounds} "
              f"alternating processes each")
        print(f"{'workload':<24}{'before ms':>11}{'after ms':>11}{'after/before':>14}"
              f"{'CPU before':>12}{'CPU after':>11}{'after/before':>14}")
        for name in args.only:
            times = {"before": [], "after": []}
            for _ in range(args.rounds):
                for which in ("before", "after"):
                    times[which] += measure(paths[which], name, args.runs)
            (b, cb), (a, ca) = ([1e3 * statistics.median(t[i] for t in times[w]) for i in (0, 1)]
                                for w in ("before", "after"))
            print(f"{name:<24}{b:11.1f}{a:11.1f}{a / b:14.3f}{cb:12.1f}{ca:11.1f}{ca / cb:14.3f}", flush=True)


if __name__ == "__main__":
    main()
