"""Sweeps: per-run overhead of the store and the pool, pool speed-up, rerun of a finished sweep
(issue 12); prints, asserts nothing.

1. 200 tiny ``verify`` runs (``[2,4,1]``, one input): per-run wall time of the sweep, against the
   same 200 calls in a plain loop (the baseline, same process): the difference is the overhead of
   the specification, the store and the executor, per run.
2. 8 CPU-bound training runs (``[2,30,1]``, 300 samples, 100,000 steps): ``--jobs 2`` against ``--jobs 1``.
3. Rerun of a finished 1000-run sweep (every run kept): the time to find there is nothing to do.

Run: ``.venv/bin/python benchmarks/bench_sweep.py``
"""

import os
import sys
import tempfile
import time

import sheaflinalg as sl
from sheaflinalg.sweep import calls

TINY = {"sweep": {"function": "verify", "metrics": ["passed"]},
        "fixed": {"arch": [2, 4, 1], "n_inputs": 1}, "grid": {"seed": {"range": [0, 200, 1]}}}
HEAVY = {"sweep": {"function": "train", "metrics": ["final_test_loss"]},
         "fixed": {"arch": [2, 30, 1], "n_train": 300, "steps": 100_000}, "grid": {"seed": {"range": [0, 8, 1]}}}
THOUSAND = {"sweep": {"function": "verify", "metrics": ["passed"]},
            "fixed": {"arch": [2, 3, 1], "n_inputs": 1}, "grid": {"seed": {"range": [0, 1000, 1]}}}


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    tmp = tempfile.mkdtemp()
    db = lambda name: os.path.join(tmp, name)  # noqa: E731
    calls.run("verify", {"arch": [2, 4, 1], "n_inputs": 1, "seed": 0})     # warm up
    loop, _ = timed(lambda: [calls.run("verify", {"arch": [2, 4, 1], "n_inputs": 1, "seed": s}) for s in range(200)])
    serial, _ = timed(lambda: sl.sweep.run(TINY, db("tiny1.db"), jobs=1, progress=False))
    pooled, _ = timed(lambda: sl.sweep.run(TINY, db("tiny2.db"), jobs=2, progress=False))
    print(f"200 tiny verify runs: plain loop {loop / 200 * 1e3:.2f} ms/run; sweep --jobs 1 "
          f"{serial / 200 * 1e3:.2f} ms/run (overhead {(serial - loop) / 200 * 1e3:.2f} ms/run); "
          f"--jobs 2 {pooled / 200 * 1e3:.2f} ms/run (pool start-up included)")
    one, _ = timed(lambda: sl.sweep.run(HEAVY, db("h1.db"), jobs=1, progress=False))
    two, _ = timed(lambda: sl.sweep.run(HEAVY, db("h2.db"), jobs=2, progress=False))
    print(f"8 training runs of 100,000 steps: --jobs 1 {one:.2f} s, --jobs 2 {two:.2f} s: {one / two:.2f}x")
    sl.sweep.run(THOUSAND, db("k.db"), jobs=2, progress=False)
    again, counts = timed(lambda: sl.sweep.run(THOUSAND, db("k.db"), jobs=2, progress=False))
    print(f"rerun of a finished 1000-run sweep: {again:.3f} s ({counts['skipped']} kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
