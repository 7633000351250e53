"""The exact heat flow against the Euler kernel, in the same run (ratios, not absolute times).

Run: ``.venv/bin/python benchmarks/bench_exact.py [--quick]``

Workload of issue 13: ``[2,30,1]``, 300 inputs, random initial state, both to tol 1e-12
(Euler: largest change in one step; exact: distance to the equilibrium).  Also prints
Euler's trajectory error at dt = 0.01 against the exact flow, and how the exact flow's
cost per segment grows with the width and the depth (ten inputs).
"""

import argparse
import time

import numpy as np

import sheaflinalg as sl


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 inputs instead of 300, widths up to 120")
    args = parser.parse_args(argv)
    n = 30 if args.quick else 300
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(n, 2))
    sl.heat(net, X[:2], dt=0.01, max_steps=10, progress=False)           # compile / load the kernel cache
    t_euler, eu = timed(lambda: sl.heat(net, X, dt=0.01, tol=1e-12, seed=1, max_steps=10**7, progress=False))
    t_exact, ex = timed(lambda: sl.heat(net, X, method="exact", tol=1e-12, seed=1))
    print(f"[2,30,1] x{n}: Euler dt=0.01 {t_euler:.3f} s ({eu.steps} steps), exact {t_exact:.3f} s "
          f"({len(ex.segments)} segments, {len(ex.events)} events, cache {ex.cache_hits} hits / "
          f"{ex.cache_misses} distinct regions, {t_exact / len(ex.segments) * 1e6:.1f} us/segment, Krylov bound "
          f"{ex.krylov_bound:.1e}): ratio exact/Euler {t_exact / t_euler:.2f}")
    short = sl.heat(net, X, dt=0.01, max_steps=100, tol=0.0, seed=1, progress=False)
    print(f"trajectory error at t = 1: Euler dt=0.01 {np.abs(short.state - ex.sol(1.0)).max():.2e}; "
          f"exact at equilibrium vs forward pass {np.abs(ex.output - net.forward(X)).max():.2e}")
    archs = [[2, w, 1] for w in ((30, 60, 120) if args.quick else (30, 100, 300, 1000))]
    archs += [[2, 30, 30, 1], [2, 10, 10, 10, 1]] + ([] if args.quick else [[2, 100, 100, 1]])
    for dims in archs:
        w = sl.Network.random(dims, seed=0)
        t, r = timed(lambda: sl.heat(w, X[:10], method="exact", seed=1))
        ks = [r.segments[i].k for i in r.segments.compiled()]
        print(f"{dims} x10: exact {t:.3f} s, {len(r.segments)} segments, {t / len(r.segments) * 1e3:.2f} ms/segment, "
              f"Krylov dimension mean {np.mean(ks) if ks else 0:.0f} (n_free {r.state.shape[1]}), "
              f"{r.fallback_samples.size} samples on the dense path")


if __name__ == "__main__":
    main()
