"""One Euler step of the sheaf heat equation on a graph network against a sparse-matrix step; prints, asserts nothing.

The case is the MNIST-1D CNN of benchmarks/graph_forward.py (conv 1->25 k5 s2, relu, conv 25->25 k3 s2,
relu, conv 25->25 k3 s2, relu, flatten, linear 125 -> 10), batch 1000, reduced system, from the
forward pass plus noise (so that the pattern and the residuals are those of a state in motion).

* ``heat``: :func:`sheaflinalg.heat` (``dynamics/euler/graph.py``): the pattern read off the state,
  every node's residual and ``-delta_P^T e`` node by node.  Its cost per step is
  ``(time of max_steps=1 + K) - (time of max_steps=1)`` over ``K``: the set-up (pins, the bound, the
  overflow check, the initial copy) is left out, every step's work is in.
* ``scipy``: the assembled sparse ``delta_Omega`` of the batch (block diagonal, CSR) with the
  pattern of the same state, and its transpose (CSR): ``e = D s + delta_U u``, ``s += alpha dt
  (-(D^T e))``.  Only the step is timed; the assembly (one per pattern: the state's pattern changes
  as it moves, so a moving state needs it again) is reported apart.  It reads no pattern.

Both with 1 thread and with the available cores (scipy's products are single-threaded), ``--runs``
runs each, interleaved; medians and the ratio.  The bound on ``lambda_max`` and the largest stable
``dt`` are printed with ``lambda_max`` of the assembled ``L`` (ARPACK) for comparison.
Run: ``.venv/bin/python benchmarks/graph_heat.py [--runs 7] [--quick]``
"""

import argparse
import time

import numpy as np
import scipy.sparse.linalg as spla

from bench_threads import timings   # interleaved timing, round by round
from graph_forward import build

import sheaflinalg as sl
from sheaflinalg._common.threads import available_cores, num_threads
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf
from sheaflinalg.sheaf.layout import Layout


def state_in_motion(net, X, seed=0):
    """The forward pass of the batch plus N(0, 0.1^2) noise on every free coordinate, ``(M, n_free)``."""
    lay = Layout.from_graph(net.graph, reduced=True)
    S = sl.harmonic_extension(net, X).free[:, :lay.n_free]
    return lay, S + 0.1 * np.random.default_rng(seed).standard_normal(S.shape)


def sparse_step(net, X, lay, S):
    """``(step function, assembly seconds, D)``: the scipy step under the pattern of the state ``S``."""
    values = {node.name: S[:, lay.free(node.name)] for node in net.graph.nodes}
    pattern = GraphSheaf(net.graph).residuals(X, values).pattern
    t = time.perf_counter()
    system = sl.assemble(net, X, pattern=pattern, reduced=True)
    D = system.delta_free.tocsr()
    DT = D.T.tocsr()
    b = system.delta_boundary @ system.u
    assembly = time.perf_counter() - t

    def step(s, adt):
        e = D @ s + b
        s -= adt * (DT @ e)
        return s
    return step, assembly, D


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="K: steps of the long heat run (default 20)")
    parser.add_argument("--quick", action="store_true", help="3 runs, batch 100, K = 5 (a smoke test)")
    args = parser.parse_args(argv)
    runs, K, batch = (3, 5, 100) if args.quick else (args.runs, args.steps, 1000)
    _, net, X = build("mnist1d_cnn", batch)
    X = X.reshape(X.shape[0], -1)
    lay, S0 = state_in_motion(net, X)
    bound = sl.lambda_max_bound(net)
    dt = 1.0 / bound
    step, assembly, D = sparse_step(net, X, lay, S0)
    lam = spla.svds(D, k=1, return_singular_vectors=False)[0] ** 2     # the largest over the samples
    print(f"MNIST-1D CNN, batch {X.shape[0]}, {lay.n_free} free coordinates per sample; "
          f"lambda_max bound {bound:.4g} (largest stable dt {2 / bound:.4g}), lambda_max of this state's "
          f"L {lam:.4g} (bound / lambda_max = {bound / lam:.2f})")
    print(f"assembly of the sparse delta_Omega (the state's pattern, {X.shape[0]} samples, and its "
          f"transpose): {assembly:.2f} s, {D.nnz} nonzeros")
    flat = S0.ravel()
    one = sl.heat(net, X, dt=dt, max_steps=1, tol=0.0, init=S0, crossings=False, progress=False).state
    print(f"max |heat step - scipy step| = {np.max(np.abs(one.ravel() - step(flat.copy(), dt))):.1e}")
    for threads in sorted({1, available_cores()}):
        def heat(k):
            return lambda: sl.heat(net, X, dt=dt, max_steps=k, tol=0.0, init=S0, crossings=False, progress=False,
                                   threads=threads)
        fns = {"heat 1 step": heat(1), f"heat {1 + K} steps": heat(1 + K),
               "scipy step": lambda: step(flat.copy(), dt)}
        with num_threads(threads):
            for fn in fns.values():            # compile, warm the caches
                fn()
            ts = timings(fns, runs)
        med = {k: float(np.median(v)) for k, v in ts.items()}
        per_step = (med[f"heat {1 + K} steps"] - med["heat 1 step"]) / K
        print(f"threads {threads}: heat step {1e3 * per_step:.2f} ms, scipy step {1e3 * med['scipy step']:.2f} ms "
              f"(ratio heat / scipy {per_step / med['scipy step']:.2f}); set-up + 1 step of heat "
              f"{1e3 * med['heat 1 step']:.1f} ms; the assembly is {assembly / med['scipy step']:.0f} scipy steps")


if __name__ == "__main__":
    main()
