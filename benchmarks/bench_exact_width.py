"""Width scaling of the exact heat flow: the dense path (eigendecomposition per region) against the
``expm_multiply`` path (sparse operators, no eigenvectors), per segment, on one input.

Run: ``.venv/bin/python benchmarks/bench_exact_width.py [--quick]``

For ``[2,w,1]`` (``N = 2w+1`` coordinates) and ``[2,w,w,1]`` (``N = 4w+1``), one input and a
random initial state: milliseconds per segment of each path over the first ``E`` events
(``max_events=E``, whose warning is expected and silenced), where the path is feasible; and the
segments of a complete run (to tol 1e-12) for the smaller widths.  The library picks the dense
path up to ``regions.DENSE_MAX_N`` coordinates and the expm path above.
"""

import argparse
import importlib
import time
import warnings

import numpy as np

import sheaflinalg as sl

regions = importlib.import_module("sheaflinalg.dynamics.exact.regions")


def run(net, x, dense, **kw):
    """``heat(method="exact")`` forced onto one path; (seconds, result)."""
    saved = regions.DENSE_MAX_N
    regions.DENSE_MAX_N = 10**9 if dense else 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            t0 = time.perf_counter()
            res = sl.heat(net, x, method="exact", seed=1, tol=1e-12, **kw)
            return time.perf_counter() - t0, res
    finally:
        regions.DENSE_MAX_N = saved


def row(dims, x, events, dense_max_n, complete_max_n):
    net = sl.Network.random(dims, seed=0)
    n = net.dims[1] * 2 * (len(dims) - 2) + 1
    cells = [f"`{dims}`".replace(" ", ""), str(n)]
    for dense in (True, False):
        if dense and n > dense_max_n:
            cells.append("-")
            continue
        seconds, res = run(net, x, dense, max_events=events)
        cells.append(f"{seconds / len(res.segments) * 1e3:.1f}")
    if n <= complete_max_n:
        seconds, res = run(net, x, n <= regions.DENSE_MAX_N, max_events=10**6)
        cells.append(f"{len(res.segments)} ({seconds:.1f} s)")
    else:
        cells.append("-")
    print("| " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller widths, fewer events")
    args = parser.parse_args(argv)
    x = np.array([[0.5, -1.0]])
    if args.quick:
        wide, deep, events, dense_max, complete_max = (30, 100, 300, 1000), (30, 100), 8, 700, 250
    else:
        wide, deep, events, dense_max, complete_max = (30, 100, 300, 1000, 2000), (30, 100, 300, 700), 20, 2100, 1300
    sl.heat(sl.Network.random([2, 4, 1], seed=0), x, method="exact")           # imports, first calls
    print(f"one input, ms per segment over the first {events} events; complete run with the library's path "
          f"(dense up to N = {regions.DENSE_MAX_N})\n")
    print("| network | N | dense ms/segment | expm ms/segment | segments to tol 1e-12 (time) |")
    print("|---|---|---|---|---|")
    for w in wide:
        row([2, w, 1], x, events, dense_max, complete_max)
    for w in deep:
        row([2, w, w, 1], x, events, dense_max, complete_max)


if __name__ == "__main__":
    main()
