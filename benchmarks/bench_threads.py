"""Threads: scaling on an idle machine and steadiness under load (issue 16); prints, asserts nothing.

Cases (the issue's):

* spectrum: ``[2,1000,1000,1]`` (N = 4001), one input, both ends with eigenvectors;
* heat: ``[2,30,1]`` x 300 inputs, a fixed number of Euler steps (``tol=0``);
* training: ``[2,30,1]`` x 30000 samples (16 tiles), a fixed number of joint-dynamics steps, per step;
* harmonic extension: ``[2,300,300,1]`` x 4096 inputs (16 sample blocks).

For each case: the default thread count (:func:`sheaflinalg.get_num_threads`), and ``threads`` =
1 .. the available cores (and one more than the cores, to show nothing assumes their number),
``--runs`` runs each (interleaved round by round), min / median / max.  Then the same with one and with two busy processes
(pure-Python spinning loops that this script starts and stops itself, each killed after
``--load-seconds`` at the latest): the claim is the ratio of the default's median (and worst run)
to ``threads=1`` in the same conditions, measured in the same run (goal: median within 1.3x,
worst within 2x).  Absolute times are examples of this machine.  Run:
``.venv/bin/python benchmarks/bench_threads.py [--runs 7] [--quick]``
"""

import argparse
import contextlib
import os
import subprocess
import sys
import time

import numpy as np

import sheaflinalg as sl
from sheaflinalg._common.threads import available_cores


@contextlib.contextmanager
def busy_processes(n, seconds):
    """``n`` processes spinning on a core each, for at most ``seconds``."""
    procs = [subprocess.Popen([sys.executable, "-c",
                               f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"])
             for _ in range(n)]
    time.sleep(0.3)   # let the scheduler place them
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def timings(fns, runs):
    """Times of every function of ``fns`` (a dict), ``runs`` each, interleaved round by round.

    Interleaving puts each variant in the same conditions: on a busy machine the load drifts,
    and timing one variant after the other would compare different moments.
    """
    ts = {key: [] for key in fns}
    for _ in range(runs):
        for key, fn in fns.items():
            t = time.perf_counter()
            fn()
            ts[key].append(time.perf_counter() - t)
    return {key: np.array(v) for key, v in ts.items()}


def cases(quick):
    X1 = np.random.default_rng(0).uniform(-2, 2, size=(1, 2))
    big = sl.Network.random([2, 1000, 1000, 1], seed=0)
    small = sl.Network.random([2, 30, 1], seed=0)
    X300 = np.random.default_rng(0).uniform(-2, 2, size=(300, 2))
    steps = 2_000 if quick else 10_000

    def spectrum(threads):
        return lambda: sl.spectrum(big, X1, threads=threads, progress=False)

    def heat(threads):
        return lambda: sl.heat(small, X300, dt=0.01, tol=0.0, max_steps=steps, seed=1, threads=threads,
                               progress=False)

    X4k = np.random.default_rng(0).uniform(-2, 2, size=(4096, 2))
    X30k, Y30k = sl.tasks.paraboloid(30_000, seed=0)
    wide = sl.Network.random([2, 300, 300, 1], seed=0)
    train_steps = 1_000 if quick else 5_000     # a run's set-up (~0.3 s at 30000 samples) is included

    def train(threads):
        return lambda: sl.train(small, X30k, Y30k, steps=train_steps, epoch_steps=train_steps, seed=0,
                                stagnation=False, progress=False, threads=threads)

    def harmonic(threads):
        return lambda: sl.harmonic_extension(wide, X4k, threads=threads)

    return {"spectrum [2,1000,1000,1] x 1, ms": (spectrum, 1e3),
            f"heat [2,30,1] x 300, us/step ({steps} steps)": (heat, 1e6 / steps),
            f"train [2,30,1] x 30000, us/step ({train_steps} steps)": (train, 1e6 / train_steps),
            "harmonic [2,300,300,1] x 4096, ms": (harmonic, 1e3)}


def fmt(ts, scale):
    return f"{ts.min() * scale:8.2f} {np.median(ts) * scale:8.2f} {ts.max() * scale:8.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer heat and training steps")
    parser.add_argument("--load-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    cores = available_cores()
    default = sl.get_num_threads()
    print(f"available cores {cores}, default threads {default}, numba threading layer after warm-up below")
    table = cases(args.quick)
    for make, _ in table.values():         # compile and warm up every path
        for t in (1, default, cores + 1):
            make(t)()
    import numba

    print(f"numba threading layer: {numba.threading_layer()}")
    print(f"\n{'case':<48}{'load':>6}{'threads':>9}{'min':>9}{'median':>9}{'max':>9}")
    ratios = []
    for name, (make, scale) in table.items():
        for load in (0, 1, 2):
            counts = sorted({1, default} | (set(range(2, cores + 2)) if load == 0 else set()))
            with busy_processes(load, args.load_seconds) if load else contextlib.nullcontext():
                res = timings({**{t: make(t) for t in counts}, "default": make(None)}, args.runs)
            for t in counts + ["default"]:
                print(f"{name:<48}{load:>6}{str(t):>9} {fmt(res[t], scale)}")
            med = np.median(res["default"]) / np.median(res[1])
            worst = res["default"].max() / np.median(res[1])
            ratios.append((name, load, med, worst))
    print("\nratio of the default to threads=1 (same load, same run): median / worst run")
    for name, load, med, worst in ratios:
        print(f"{name:<48} load {load}: {med:5.2f}x / {worst:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
