"""Benchmarks of the engine core (issue 2); prints times and ratios, asserts nothing.

1. Harmonic extension (block forward substitution) vs a plain numpy forward
   pass, batch 1000, network [784, 1000, 1000, 1000, 10].  Goal: within 1.5x.
2. Assembly of delta_Omega + exact det certificate for 10 million weights
   (eleven layers of width 1000).  Goal: under 3 s and under 1 GB.

Run: ``.venv/bin/python benchmarks/bench_core.py``
"""

import resource
import time
import tracemalloc

import numpy as np

import sheaflinalg as sl
from sheaflinalg.sheaf.verification.verify import unit_lower_triangular_certificate


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def numpy_forward(weights, biases, X):
    a = X
    for W, b in zip(weights[:-1], biases[:-1]):
        a = np.maximum(a @ W.T + b, 0.0)
    return a @ weights[-1].T + biases[-1]


def bench_harmonic():
    net = sl.Network.random([784, 1000, 1000, 1000, 10], seed=0)
    X = np.random.default_rng(0).uniform(-1, 1, size=(1000, 784))
    sl.harmonic_extension(net, X)
    t_ref = best_of(lambda: numpy_forward(net.weights, net.biases, X), 7)
    t_h = best_of(lambda: sl.harmonic_extension(net, X), 7)
    err = np.max(np.abs(sl.harmonic_extension(net, X).output - numpy_forward(net.weights, net.biases, X)))
    print(f"harmonic extension [784,1000,1000,1000,10], batch 1000: {t_h * 1e3:.1f} ms; "
          f"numpy forward pass {t_ref * 1e3:.1f} ms; ratio {t_h / t_ref:.2f}x (goal <= 1.5x); "
          f"max |difference| {err:.1e}")


def bench_assembly():
    dims = [1000] * 11
    net = sl.Network.random(dims, seed=0)
    x = np.random.default_rng(0).uniform(-1, 1, size=1000)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    t = time.perf_counter()
    system = sl.assemble(net, x)
    D = system.delta_free
    ok, reason = unit_lower_triangular_certificate(D)
    elapsed = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    weights_mb = net.n_parameters * 8 / 1e6
    print(f"assembly + exact certificate, {net.n_parameters / 1e6:.1f} M parameters, N = {D.shape[0]}: "
          f"{elapsed:.2f} s (goal < 3 s); certificate {'passed' if ok else 'FAILED: ' + reason}; "
          f"peak traced memory {peak / 1e6:.0f} MB (goal < 1000 MB; the weights alone are {weights_mb:.0f} MB); "
          f"max RSS growth {(rss1 - rss0) / 1e3:.0f} MB")


if __name__ == "__main__":
    bench_harmonic()
    bench_assembly()
