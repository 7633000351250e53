"""Work-precision of the joint dynamics: forward Euler at several steps against IMEX (ROS2) at several tolerances.

Every run integrates the paper's joint dynamics (``sl.train``, alpha 1, beta
1 / n_train, ``init="forward"``) to the same model time ``T``; the reference
is forward Euler with a very fine step.  Error: relative error of the weights
at ``T`` (``||theta - theta_ref|| / ||theta_ref - theta_0||``) and of the
training loss; cost: wall time (compiled code warmed up first) and force
evaluations (one per Euler step; two per ROS2 step, rejected ones included).
Prints one table per task with the cost ratios to the cheapest Euler run of
comparable or better weight error, and draws ``docs/img/joint_work_precision.png``.

Run: ``.venv/bin/python benchmarks/joint_work_precision.py [--quick]``
"""

import pathlib
import sys
import time

import numpy as np

import sheaflinalg as sl

OUT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "img" / "joint_work_precision.png"


def tasks(quick):
    n = 60 if quick else 200
    X, Y = sl.tasks.paraboloid(n, seed=0)
    yield "paraboloid [2, 30, 1], mse", sl.Network.random([2, 30, 1], seed=0), X, Y, 20.0
    Xb, Yb = sl.tasks.blobs(n, seed=0)
    net = sl.Network.random([2, 16, 16, Yb.shape[1]], seed=0, output="softmax")
    yield "blobs [2, 16, 16, 4], softmax cross-entropy", net, Xb, Yb, 20.0


def run(net, X, Y, T, **kw):
    start = time.perf_counter()
    fit = sl.train(net, X, Y, init="forward", progress=False, stagnation=False, **kw)
    return fit, time.perf_counter() - start


def measure(name, net, X, Y, T, quick):
    fine = 2e-4 if quick else 1e-4
    sl.train(net, X, Y, dt=0.01, steps=2, epoch_steps=2, progress=False, stagnation=False)   # compile
    sl.train(net, X, Y, dt=0.01, steps=2, epoch_steps=2, progress=False, stagnation=False, method="imex")
    n_fine = int(round(T / fine))
    ref, _ = run(net, X, Y, T, dt=fine, steps=n_fine, epoch_steps=n_fine)
    theta0, theta_ref = net.parameters(), ref.network.parameters()
    loss_ref = ref.history.train_loss[-1]
    rows = []
    for dt in (0.1, 0.05, 0.02, 0.01, 0.005):
        n = int(round(T / dt))
        fit, sec = run(net, X, Y, T, dt=dt, steps=n, epoch_steps=n)
        rows.append(("euler", f"dt={dt:g}", fit, sec, n))
    for tol in ((1e-2, 1e-3, 1e-4) if quick else (1e-2, 1e-3, 1e-4, 1e-5)):
        n = int(round(T / 0.05))
        fit, sec = run(net, X, Y, T, dt=0.05, steps=n, epoch_steps=n, method="imex", tol=tol)
        rows.append(("imex", f"tol={tol:g}", fit, sec, fit.integration["force_evaluations"]))
    table = []
    for method, setting, fit, sec, evals in rows:
        theta = fit.network.parameters()
        err = np.linalg.norm(theta - theta_ref) / np.linalg.norm(theta_ref - theta0)
        if fit.history.diverged:
            err = np.inf
        lerr = abs(fit.history.train_loss[-1] - loss_ref) / abs(loss_ref)
        table.append((method, setting, err, lerr, sec, evals))
    print(f"\n{name}: {X.shape[0]} samples, T = {T:g}, reference Euler dt = {fine:g} ({n_fine} steps)")
    print(f"{'method':7} {'setting':10} {'weight err':>11} {'loss err':>10} {'seconds':>9} {'forces':>8} "
          f"{'time / Euler':>13}")
    for method, setting, err, lerr, sec, evals in table:
        euler = [r for r in table if r[0] == "euler" and r[2] <= err]
        ratio = f"{sec / min(r[4] for r in euler):13.2f}" if euler and method == "imex" else " " * 13
        print(f"{method:7} {setting:10} {err:11.3e} {lerr:10.3e} {sec:9.3f} {evals:8d} {ratio}")
    return table


def draw(results):
    import matplotlib
    matplotlib.use("Agg")          # inside the script only: the library never sets a backend
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.2))
    for ax, (name, table) in zip(np.atleast_1d(axes), results):
        for method, marker in (("euler", "o-"), ("imex", "s-")):
            pts = [(r[4], r[2]) for r in table if r[0] == method and np.isfinite(r[2])]
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker, label=method)
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("relative weight error at T")
        ax.set_title(name, fontsize=10)
        ax.legend()
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=110)
    print(f"\nfigure: {OUT}")


def main():
    quick = "--quick" in sys.argv
    results = [(name, measure(name, net, X, Y, T, quick)) for name, net, X, Y, T in tasks(quick)]
    draw(results)


if __name__ == "__main__":
    main()
