"""The cost of reading the step bound at every step's state (dynamics/euler/adaptive.py); prints, asserts nothing.

The case: ``T`` tokens of ``d`` features (batch ``M``), a pre-norm MLP block with a gate written with the
graph's own nodes: ``h = fc1(x)``, ``n = layernorm(h)``, ``a = fc2(n)``, ``g = silu(fc3(n))``,
``m = a * g`` (``mul``), ``out = fc4(layernorm(m))``: two normalisations and a product, the nodes whose
step bound follows the state.  From the forward pass plus noise, at a ``dt`` stable along the run (so the
adaptive run never halves and both runs take the same steps):

* ``adaptive``: :func:`sheaflinalg.heat` with its default (every step: the state-dependent nodes'
  ``norm_at`` over the batch, ``||I + (n_vu)||_2`` of the small node matrix, then the step);
* ``fixed``: the same run with ``check_stability=False`` (the fixed step, no bound read).

Per step: ``(time of 1 + K steps) - (time of 1 step)`` over ``K``, medians of ``--runs`` interleaved runs, one
thread; the ratio ``adaptive / fixed`` is the claim, and the time of the bound alone (``norm_at`` of
every state-dependent node and the 2-norm) is printed next to it.
Run: ``.venv/bin/python benchmarks/adaptive_heat.py [--runs 7] [--quick]``
"""

import argparse
import time

import numpy as np

from bench_threads import timings   # interleaved timing, round by round

import sheaflinalg as sl
from sheaflinalg.dynamics.euler.adaptive import StepControl
from sheaflinalg.sheaf.layout import Layout


def block(T, d, seed=0):
    """The gated pre-norm block of the module on ``(T, d)`` tokens."""
    rng = np.random.default_rng(seed)

    def fc(name, src, n=d):
        return sl.Node(name, "linear", [src], params={"weight": rng.normal(size=(n, d)) / np.sqrt(d),
                                                      "bias": 0.1 * rng.normal(size=n)})
    ln = {"n_axes": 1, "eps": 1e-5}
    nodes = [fc("fc1", "x"), sl.Node("ln1", "layernorm", ["fc1"], ln), fc("fc2", "ln1"), fc("fc3", "ln1"),
             sl.Node("g", "silu", ["fc3"]), sl.Node("m", "mul", ["fc2", "g"]),
             sl.Node("ln2", "layernorm", ["m"], ln), fc("out", "ln2")]
    return sl.Network.from_nodes((T, d), nodes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs, K = 5, small sizes (a smoke test)")
    parser.add_argument("--batch", type=int, default=256, help="M (default 256)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="K (default 20)")
    args = parser.parse_args(argv)
    runs, K, (M, T, d) = (3, 5, (8, 8, 16)) if args.quick else (args.runs, args.steps, (args.batch, 16, 64))
    net = block(T, d)
    X = np.random.default_rng(1).normal(size=(M, T * d))
    lay = Layout.from_graph(net.graph, reduced=True)
    S0 = sl.harmonic_extension(net, X).free[:, :lay.n_free]
    S0 = S0 + 0.01 * np.random.default_rng(2).standard_normal(S0.shape)
    probe = sl.heat(net, X, dt=1e-3, max_steps=1 + K, tol=0.0, init=S0, reduced=True, crossings=False,
                    progress=False, threads=1)
    dt = 0.5 / probe.state_bounds.max()           # stable along the run: no halving
    common = dict(dt=dt, tol=0.0, init=S0, reduced=True, crossings=False, progress=False, threads=1)
    fns = {f"{kind} {k}": (lambda k=k, o=o: sl.heat(net, X, max_steps=k, **common, **o))
           for kind, o in (("adaptive", {}), ("fixed", {"check_stability": False})) for k in (1, 1 + K)}
    control = StepControl(net.graph, 1.0, dt, 0.0, True)
    pattern = net.evaluate(X).pattern
    fns["bound"] = lambda: control.bound(control.norms(pattern))
    for fn in fns.values():
        fn()
    med = {k: float(np.median(v)) for k, v in timings(fns, runs).items()}
    step = {kind: (med[f"{kind} {1 + K}"] - med[f"{kind} 1"]) / K for kind in ("adaptive", "fixed")}
    print(f"gated pre-norm block, batch {M}, {T} tokens x {d} features, {lay.n_free} free coordinates per sample, "
          f"dt {dt:.3g}, {time.strftime('%Y-%m-%d')}")
    print(f"per step: adaptive {1e3 * step['adaptive']:.2f} ms, fixed {1e3 * step['fixed']:.2f} ms (ratio "
          f"{step['adaptive'] / step['fixed']:.3f}); the bound alone {1e3 * med['bound']:.2f} ms")


if __name__ == "__main__":
    main()
