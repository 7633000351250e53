"""The implicit heat equation against forward Euler on the ViT and GPT families (issue 32); prints, asserts nothing.

The tiny float64 families of the test suite (tests/helpers/families.py, imported from torch), one input, the
random start of ``seed=3`` (the suite's case), settled to ``tol=1e-10``:

* ``implicit``: :func:`sheaflinalg.heat` with ``method="implicit"`` at its defaults, the whole run (its steps,
  conjugate-gradient iterations and energies are printed);
* ``euler``: forward Euler at ``0.9`` times the largest ``dt`` the library accepts at the start (the suite's
  choice), per step: ``(time of 1 + K steps) - (time of 1 step)`` over ``K``.  Its steps to ``tol`` are
  ``ln(||x_0 - x*|| / tol) / -ln(1 - alpha dt mu_min)``: the slowest mode of the linearised flow at the
  forward pass ``x*`` (``mu_min``, the smallest eigenvalue of the sheaf Laplacian there, ``sl.spectrum``),
  which the flow's last phase follows; ``--euler-steps N`` runs ``N`` steps as well and prints the distance
  they leave and the estimate from there; ``--full-euler`` runs Euler to ``tol`` once (minutes: ~1e5 steps).

Both are timed in the same rounds (interleaved, ``--runs``), one thread; medians and minima.  The claim is the
ratio ``implicit run / (Euler step x Euler's steps)``, measured in the same run.
Run: ``.venv/bin/python benchmarks/implicit_heat.py [--runs 5] [--families vit gpt] [--euler-steps 2000]
[--full-euler]``
"""

import argparse
import math
import os
import re
import sys
import time

import numpy as np

from bench_threads import timings   # interleaved timing, round by round

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))

import sheaflinalg as sl  # noqa: E402
from helpers.families import family  # noqa: E402


def largest_dt(net, X):
    """The largest ``dt`` the library accepts at the random start (read off its refusal of a huge one)."""
    try:
        sl.heat(net, X, dt=1e6, max_steps=1, seed=3, adaptive=False, progress=False)
    except ValueError as refusal:
        return float(re.search(r"largest stable dt (?:is )?([0-9.e+-]+)", str(refusal)).group(1))
    raise RuntimeError("dt=1e6 was accepted")


def euler_steps(net, X, dt, tol):
    """Euler's steps to ``tol`` along the slowest mode at the forward pass, ``mu_min`` and the start's distance."""
    forward = sl.harmonic_extension(net, X).free
    start = sl.heat(net, X, dt=dt, max_steps=0, seed=3, progress=False).state
    distance = float(np.linalg.norm(start - forward[:, :start.shape[1]]))
    mu = float(sl.spectrum(net, X, k=1, vectors=False, progress=False).smallest[0, 0])
    return math.log(distance / tol) / -math.log1p(-dt * mu), mu, distance, forward


def one_family(name, runs, K, tol, check_steps, full):
    """Print one family's lines (and the Euler check of ``check_steps`` steps, and Euler's whole run if ``full``)."""
    model, shape = family(name)
    net = sl.Network.from_torch(model, input_shape=shape)
    X = np.random.default_rng(2).normal(size=(1,) + shape).reshape(1, -1)
    dt = 0.9 * largest_dt(net, X)
    steps, mu, distance, forward = euler_steps(net, X, dt, tol)
    common = dict(tol=0.0, seed=3, crossings=False, progress=False, threads=1)
    fns = {"euler 1": lambda: sl.heat(net, X, dt=dt, max_steps=1, **common),
           f"euler {1 + K}": lambda: sl.heat(net, X, dt=dt, max_steps=1 + K, **common),
           "implicit": lambda: sl.heat(net, X, method="implicit", tol=tol, seed=3, progress=False, threads=1)}
    res = fns["implicit"]()
    ts = timings(fns, runs)
    med, low = ({k: float(f(v)) for k, v in ts.items()} for f in (np.median, np.min))
    step = (med[f"euler {1 + K}"] - med["euler 1"]) / K
    step_low = (low[f"euler {1 + K}"] - low["euler 1"]) / K
    error = float(np.abs(res.state - forward[:, :res.layout.n_free]).max())
    print(f"{name}: {res.layout.n_free} free coordinates, mu_min {mu:.3g}, Euler dt {dt:.3g}, start distance "
          f"{distance:.3g}")
    print(f"  implicit: {res.steps} steps ({int((~res.taken).sum())} refused), {int(res.cg_iterations.sum())} CG "
          f"iterations ({res.cg_iterations.tolist()}), max error {error:.1e}, {med['implicit']:.3f} s "
          f"(min {low['implicit']:.3f})")
    print(f"  euler: {1e3 * step:.2f} ms a step (min {1e3 * step_low:.2f}), ~{steps:.3g} steps to tol: "
          f"~{step * steps:.0f} s; ratio euler / implicit {step * steps / med['implicit']:.0f} "
          f"(minima {step_low * steps / low['implicit']:.0f})")
    if check_steps:
        run = sl.heat(net, X, dt=dt, max_steps=check_steps, **common)
        left = float(np.linalg.norm(run.state - forward[:, :run.layout.n_free]))
        more = math.log(left / tol) / -math.log1p(-dt * mu)
        print(f"  euler check: {check_steps} steps leave {left:.3g} (slowest mode alone: "
              f"{distance * (1 - dt * mu) ** check_steps:.3g}); from there ~{check_steps + more:.3g} steps to tol")
    if full:
        t = time.perf_counter()
        run = sl.heat(net, X, dt=dt, max_steps=1_000_000, **dict(common, tol=tol))
        print(f"  euler run to tol: {run.steps} steps, converged {run.converged}, {time.perf_counter() - t:.0f} s, "
              f"max error {np.abs(run.state - forward[:, :run.layout.n_free]).max():.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["vit", "gpt"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=50, help="K, Euler steps timed (default 50)")
    parser.add_argument("--euler-steps", type=int, default=0, help="also run this many Euler steps (a check)")
    parser.add_argument("--full-euler", action="store_true", help="also run Euler to tol (minutes)")
    parser.add_argument("--quick", action="store_true", help="2 runs, K = 5 (a smoke test)")
    args = parser.parse_args(argv)
    runs, K = (2, 5) if args.quick else (args.runs, args.steps)
    print(f"implicit heat against forward Euler, tol 1e-10, one thread, {time.strftime('%Y-%m-%d')}, "
          f"load {os.getloadavg()[0]:.2f}")
    for name in args.families:
        one_family(name, runs, K, 1e-10, args.euler_steps, args.full_euler)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
