"""Training benchmarks: sheaf joint dynamics and the SGD baseline against numpy steps run in the same process.

Run: ``.venv/bin/python benchmarks/bench_training.py [--quick] [--skip-table] [--digits-steps N]``

1. Paraboloid 1H ([2,30,1], 300 samples), 10^5 Euler steps.  Reference
   library: 21.5 s on a 2-core machine; goal under 1.0 s.  Baseline here: the
   obvious vectorised numpy step (samples as columns), timed over a few
   thousand steps and scaled.
2. SGD baseline, same network, 10^5 epochs (reference 15.4 s), against a
   numpy forward/backward step.
3. Whole Table E.1 (8 sheaf + 8 SGD runs, the protocol of ``sheaflinalg reproduce table_e1``),
   goal under 30 s; sequential in this process, and with 2 worker processes.
4. Scale: [64,256,256,10] on scikit-learn's digits (1797 samples), 10^4
   steps: steps per second, accuracy, peak memory, with a progress bar.

Timings are noisy when other jobs share the cores; the load average is printed.
"""

import argparse
import os
import resource
import sys
import time

import numpy as np

import sheaflinalg as sl


def numpy_sheaf_steps(exp, steps):
    """The reference step of reference-protocols.md in vectorised numpy (one hidden layer, identity output)."""
    (W1, W2), (b1, b2) = [W.copy() for W in exp.network.weights], [b.copy() for b in exp.network.biases]
    b1, b2 = b1[:, None], b2[:, None]
    X, Y = exp.X_train.T, exp.Y_train.T
    n1 = W1.shape[0]
    z1, a1, z2 = exp.init[:, :n1].T.copy(), exp.init[:, n1:2 * n1].T.copy(), exp.init[:, 2 * n1:].T.copy()
    m = exp.meta
    adt, bdt = m["alpha"] * m["dt"], m["beta"] * m["dt"]
    for _ in range(steps):
        r1 = W1 @ X + b1 - z1
        r2 = W2 @ a1 + b2 - z2
        R = z1 >= 0
        e_a = a1 - R * z1
        dz1 = r1 + R * e_a
        da1 = -e_a - W2.T @ r2
        dz2 = r2 - (z2 - Y)
        W1 -= bdt * r1 @ X.T
        b1 -= bdt * r1.sum(axis=1, keepdims=True)
        W2 -= bdt * r2 @ a1.T
        b2 -= bdt * r2.sum(axis=1, keepdims=True)
        z1 += adt * dz1
        a1 += adt * da1
        z2 += adt * dz2
    return W1, W2


def numpy_gd_steps(exp, epochs):
    (W1, W2), (b1, b2) = [W.copy() for W in exp.network.weights], [b.copy() for b in exp.network.biases]
    X, Y = exp.X_train, exp.Y_train
    lr = exp.meta["sgd_lr"]
    n = Y.size
    for _ in range(epochs):
        z1 = X @ W1.T + b1
        a1 = np.maximum(z1, 0.0)
        out = a1 @ W2.T + b2
        d2 = 2.0 * (out - Y) / n
        d1 = (d2 @ W2) * (z1 >= 0)
        W2 -= lr * d2.T @ a1
        b2 -= lr * d2.sum(axis=0)
        W1 -= lr * d1.T @ X
        b1 -= lr * d1.sum(axis=0)
    return W1, W2


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t, out


def bench_paraboloid(steps, baseline_steps):
    exp = sl.tasks.table_e1("paraboloid_1H")
    exp.run(steps=1000)                                   # compile / load the numba cache
    exp.run(steps=1000, method="sgd")
    t_sheaf, h = timed(exp.run, steps=steps, stagnation=False)
    t_np, _ = timed(numpy_sheaf_steps, exp, baseline_steps)
    t_np *= steps / baseline_steps
    print(f"[1] paraboloid 1H, {steps} Euler steps: sl.train {t_sheaf:.2f} s "
          f"({t_sheaf / steps * 1e6:.1f} us/step); numpy step (scaled from {baseline_steps}) {t_np:.2f} s; "
          f"speed-up {t_np / t_sheaf:.1f}x; reference library {21.5 * steps / 1e5:.3g} s "
          f"({21.5 * steps / 1e5 / t_sheaf:.1f}x); goal {steps / 1e5:.3g} s; "
          f"curve error {exp.max_relative_error(h):.1e}")
    t_sgd, h = timed(exp.run, steps=steps, method="sgd")
    t_np, _ = timed(numpy_gd_steps, exp, baseline_steps)
    t_np *= steps / baseline_steps
    print(f"[2] paraboloid 1H, {steps} SGD epochs: sl.sgd {t_sgd:.2f} s ({t_sgd / steps * 1e6:.1f} us/epoch); "
          f"numpy step {t_np:.2f} s; speed-up {t_np / t_sgd:.1f}x; reference library {15.4 * steps / 1e5:.3g} s "
          f"({15.4 * steps / 1e5 / t_sgd:.1f}x); curve error {exp.max_relative_error(h, 'sgd'):.1e}")


def bench_table():
    from sheaflinalg.reproduce.table_e1 import run_all

    names = list(sl.tasks.TABLE_E1)
    t, results = timed(run_all, names, None, 1, progress=False)
    ref = sum(r["reference_seconds"]["sheaf"] + r["reference_seconds"]["sgd"] for r in results)
    worst = max(max(r["sheaf"]["max_rel_error"], r["sgd"]["max_rel_error"]) for r in results)
    print(f"[3] whole Table E.1 (16 runs), one worker process: {t:.1f} s; reference library {ref:.0f} s "
          f"({ref / t:.1f}x); goal 30 s; worst curve error {worst:.1e}")
    t2, _ = timed(run_all, names, None, 2, progress=False)
    print(f"    with 2 worker processes: {t2:.1f} s ({ref / t2:.1f}x the reference)")


def bench_digits(steps):
    from sklearn.datasets import load_digits

    d = load_digits()
    X, y = d.data / 16.0, d.target
    net = sl.Network.random([64, 256, 256, 10], seed=0, output="softmax")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t, fit = timed(sl.train, net, X, y, steps=steps, dt=0.01, init="forward", warm_start=False,
                   epoch_steps=1000, progress=True, stagnation=False)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    h = fit.history
    state_mb = fit.state.nbytes / 2 ** 20
    print(f"[4] digits [64,256,256,10], 1797 samples, {steps} steps: {t:.1f} s, {steps / t:.1f} steps/s; "
          f"train accuracy {h.train_accuracy[0]:.3f} -> {h.train_accuracy[-1]:.3f}, loss "
          f"{h.train_loss[0]:.3f} -> {h.train_loss[-1]:.3f}; peak RSS {rss / 1024:.0f} MB "
          f"(+{(rss - rss0) / 1024:.0f} MB during training; one cochain is {state_mb:.1f} MB)")


def main(argv=None):
    p = argparse.ArgumentParser(description="training benchmarks")
    p.add_argument("--quick", action="store_true", help="10^4 steps for [1]/[2], skip [3], 1000 digits steps")
    p.add_argument("--skip-table", action="store_true", help="skip the whole-table benchmark")
    p.add_argument("--digits-steps", type=int, default=None, help="steps of the scale benchmark (default 10^4)")
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    steps = 10_000 if args.quick else 100_000
    bench_paraboloid(steps, 2000)
    if not (args.quick or args.skip_table):
        bench_table()
    bench_digits(args.digits_steps or (1000 if args.quick else 10_000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
