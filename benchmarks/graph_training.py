"""Training a graph network (issue 22): one joint-dynamics step against one torch backprop step; prints only.

The MNIST-1D CNN of ``graph_forward.py`` (conv 1->25 k5 s2 p1, relu, conv 25->25 k3 s2 p1, relu, conv
25->25 k3 s2 p1, relu, flatten, linear 125 -> 10), softmax output with cross-entropy, batch 1000,
float64, imported with ``sl.Network.from_torch``.  For each thread count (1 and the available cores;
torch's own count set to the same and restored):

* torch: one backprop step: forward, cross-entropy, backward (``zero_grad`` first);
* ``sl.train``: one Euler step of the joint dynamics (state + parameters), measured as the difference
  of a run of ``1 + k`` steps and a run of 1 step, divided by ``k`` (what a run costs per step; the
  set-up and the records are in both runs);
* ``sl.sgd``: one exact gradient step by backward substitution in the sheaf, the same way.

Runs interleaved, ``--runs`` each; the ratio of the medians is the claim.  Then the time of one joint
step split into its parts (one thread).
Run: ``.venv/bin/python benchmarks/graph_training.py [--runs 5] [--quick]``
"""

import argparse
import collections
import time

import numpy as np

from graph_forward import _torch, build

import sheaflinalg as sl
from sheaflinalg._common.threads import available_cores, blas_limit, num_threads
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.sheaf.matrix_free.bound import graph_lambda_max_bound
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf
from sheaflinalg.training.output_edge import loss_pull
from sheaflinalg.training.velocity import GraphParameters, ParameterVelocity

STEPS = 10     # the extra steps of the longer run


def problem(batch):
    """``(torch model, softmax graph network, X, one-hot Y, stable dt)`` of the MNIST-1D CNN."""
    model, net, X = build("mnist1d_cnn", batch)
    net = net.replace(output="softmax")
    labels = np.random.default_rng(2).integers(0, 10, size=X.shape[0])
    dt = 1.0 / graph_lambda_max_bound(net.graph)      # alpha dt lambda_max <= 1 < 2
    return model, net, X, np.eye(10)[labels], dt


def per_step(run):
    """``(run(1 + STEPS) - run(1)) / STEPS``: the time of one step inside a run."""
    t = time.perf_counter()
    run(1)
    short = time.perf_counter() - t
    t = time.perf_counter()
    run(1 + STEPS)
    return (time.perf_counter() - t - short) / STEPS


def compare(threads, runs, batch):
    """Print torch vs ``sl.train`` / ``sl.sgd`` per step with ``threads`` threads (both libraries); returns medians."""
    t = _torch()
    model, net, X, Y, dt = problem(batch)
    Xt, labels = t.from_numpy(X), t.from_numpy(Y.argmax(axis=1))

    def torch_step():
        t0 = time.perf_counter()
        model.zero_grad()
        t.nn.functional.cross_entropy(model(Xt), labels).backward()
        return time.perf_counter() - t0

    def joint(n):
        sl.train(net, X, Y, dt=dt, steps=n, epoch_steps=n, init="forward", progress=False, stagnation=False)

    def descent(n):
        sl.sgd(net, X, Y, epochs=n, record_every=n, progress=False)

    fns = {"torch": torch_step, "sl.train": lambda: per_step(joint), "sl.sgd": lambda: per_step(descent)}
    before = t.get_num_threads()
    t.set_num_threads(threads)
    try:
        with num_threads(threads):
            for fn in fns.values():          # compile, warm the caches
                fn()
            ts = {k: [] for k in fns}
            for _ in range(runs):            # interleaved: every variant under the same load
                for k, fn in fns.items():
                    ts[k].append(fn())
    finally:
        t.set_num_threads(before)
    med = {k: float(np.median(v)) for k, v in ts.items()}
    print(f"MNIST-1D CNN, batch {X.shape[0]}, float64, threads {threads} (ms per step: min / median):")
    for k, v in ts.items():
        print(f"  {k:10s} {1e3 * min(v):8.2f} / {1e3 * med[k]:8.2f}   ratio to torch {med[k] / med['torch']:.2f}x")
    return med


def split(batch, runs):
    """Print one joint step split into its parts (one thread, BLAS one thread)."""
    _, net, X, Y, _ = problem(batch)
    graph, X = net.graph, X.reshape(X.shape[0], -1)
    params = GraphParameters(graph)
    theta = params.flat()
    velocity = ParameterVelocity(graph)
    values = {k: v.copy() for k, v in evaluate(graph, X).values.items() if k != "x"}
    spent = collections.Counter()
    with blas_limit(1):
        for r in range(runs + 1):            # the first run warms up
            clock = time.perf_counter()

            def lap(part):
                nonlocal clock
                now = time.perf_counter()
                spent[part] += (now - clock) * (r > 0)
                clock = now
            g = params.graph(theta)
            sheaf = GraphSheaf(g)
            lap("rebuild the graph")
            res = sheaf.residuals(X, values)
            lap("residuals (a forward pass)")
            sheaf.force(res)
            loss_pull(g.output, "cross_entropy", values[g.output_node], Y)
            lap("force (a backward pass)")
            velocity.flat(params, X, values, res.edges)
            lap("parameter velocity")
    total = sum(spent.values())
    print("one joint step, one thread: " + ", ".join(f"{part} {1e3 * s / runs:.1f} ms ({100 * s / total:.0f}%)"
                                                    for part, s in spent.items()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 runs, batch 100 (a smoke test)")
    args = parser.parse_args(argv)
    runs, batch = (2, 100) if args.quick else (args.runs, 1000)
    for threads in sorted({1, available_cores()}):
        compare(threads, runs, batch)
    split(batch, runs)


if __name__ == "__main__":
    main()
