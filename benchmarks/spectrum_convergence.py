"""Where a large network's spectrum spends its products: each end's Lanczos history, one image (issue 34).

For one seeded input image of a torchvision model (the tests' zoo: random weights, seeded batch-norm
statistics, float64) at ``--side``, on the reduced system:

* ``lambda_max``: the plain Lanczos recurrence on ``L`` (:class:`~sheaflinalg.spectral.lanczos.LargestLanczos`,
  what ``sl.spectrum`` runs), its Ritz value ``theta`` and relative Ritz estimate at every step;
* ``lambda_min``: ARPACK on ``L^{-1}`` (SciPy's object, what ``sl.spectrum`` runs), its products counted; and the
  same plain recurrence on ``L^{-1}`` for a history of ``1 / theta`` and its estimate (ARPACK does not expose
  its Ritz values);
* ``--energy``: ``sl.spectrum(vectors=True)`` and the edge energies of both eigenvectors, largest first;
* ``--localise NODE``: the ``lambda_max`` eigenvector's squared norm on each pixel of ``NODE`` (a convolutional
  node), and the recurrence on ``L`` started from a random vector on one pixel of ``NODE`` (all channels, zero
  elsewhere): the pixel of the largest share, the second, the smallest; its products and the value it stops at.

Prints the products of each end, CPU seconds (one thread; a product's also in units of the forward pass's CPU
seconds, measured in the same run) and the load average, the histories at a few steps, and the largest Ritz
values of ``L`` when the recurrence stopped (the cluster at the top); ``--json FILE`` writes everything.  Run:
``.venv/bin/python benchmarks/spectrum_convergence.py --model resnet50 --side 32 [--energy]
[--localise layer2.0.relu_2] [--json out.json]``.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
from scipy.linalg import eigh_tridiagonal

HERE = os.path.dirname(os.path.abspath(__file__))


def _network(model, side):
    sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
    from helpers import zoo

    import sheaflinalg as sl

    torch_model, _ = zoo.build(model)
    net = sl.Network.from_torch(torch_model.double(), input_shape=(3, side, side))
    return net, np.random.default_rng(1).standard_normal((1, 3 * side * side))


def _operator(net, x):
    from sheaflinalg.spectral.operators.graph_systems import graph_operators, graph_pattern

    pattern, _ = graph_pattern(net, x, None, True)
    return graph_operators(net, pattern, None)([0])


class _Recorded:
    """A :class:`LargestLanczos` on one operator that records ``theta`` and its relative Ritz estimate per step."""

    def __init__(self, n, tol, v0):
        from sheaflinalg.spectral.lanczos import LargestLanczos

        self.problem = LargestLanczos(n, tol, None, v0, vector=False)
        self.history = []

    def run(self, apply):
        p = self.problem
        while (request := p.request()) is not None:
            request[1][:] = apply(request[0])
            if p._s is not None and len(p._alpha) > len(self.history):
                self.history.append((p._theta, p._beta[-1] * abs(p._s[-1]) / abs(p._theta)))
        self.history.append((p._theta, p._estimate))
        return self.history

    def top(self, count=20):
        """The ``count`` largest Ritz values of the last tridiagonal matrix and their relative Ritz estimates."""
        p = self.problem
        theta, S = eigh_tridiagonal(np.array(p._alpha), np.array(p._beta[:-1]))
        top = slice(max(0, theta.size - count), theta.size)
        return [(float(t), float(p._beta[-1] * abs(s) / abs(t))) for t, s in zip(theta[top][::-1], S[-1, top][::-1])]


def _arpack_products(apply, n, tol, v0):
    """Products ARPACK's shift-invert problem (``sl.spectrum``'s for ``lambda_min``) takes, and its value."""
    from sheaflinalg.spectral.arpack_pair import _Problem

    problem = _Problem(n, 1, tol, None, None, v0)
    count = 0
    while (request := problem.request()) is not None:
        request[1][:] = apply(request[0])
        count += 1
    mu, _ = problem.result()
    return count, 1.0 / float(mu[0])


def _timed(f):
    cpu, wall = time.process_time(), time.perf_counter()
    out = f()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def measure(model, side, tol, energy, localise=None):
    """The numbers of one model at one side, as a dict."""
    from sheaflinalg.spectral.arpack import _start_vector

    net, x = _network(model, side)
    op = _operator(net, x)
    apply_L, apply_Linv = op.single(0)
    v0 = _start_vector(op.n)
    out = {"model": model, "side": side, "n_free": op.n, "tol": tol, "load_before": os.getloadavg()[0],
           "forward_cpu": float(np.median([_timed(lambda: net.forward(x))[1] for _ in range(3)]))}
    recorded = _Recorded(op.n, tol, v0)
    top, cpu, wall = _timed(lambda: recorded.run(apply_L))
    out["lambda_max"] = {"products": len(top), "value": top[-1][0], "cpu": cpu, "wall": wall, "history": top,
                         "ritz": recorded.top()}
    (count, value), cpu, wall = _timed(lambda: _arpack_products(apply_Linv, op.n, tol, v0))
    out["lambda_min_arpack"] = {"products": count, "value": value, "cpu": cpu, "wall": wall}
    low, cpu, wall = _timed(lambda: _Recorded(op.n, tol, v0).run(apply_Linv))
    out["lambda_min_lanczos"] = {"products": len(low), "value": 1.0 / low[-1][0], "cpu": cpu, "wall": wall,
                                 "history": low}
    if energy:
        out["energy"] = _energy(net, x)
    if localise:
        out["localised"] = _localised(net, x, op.n, apply_L, tol, localise)
    out["load_after"] = os.getloadavg()[0]
    return out


def _energy(net, x):
    import sheaflinalg as sl

    sp = sl.spectrum(net, x, vectors=True, progress=False)
    tables = {}
    for which in ("smallest", "largest"):
        edges = sl.spectral.edge_energy(net, x, sp, which=which)
        tables[which] = sorted(((e, float(v[0])) for e, v in edges.items()), key=lambda t: -t[1])[:12]
        blocks = sp.block_energy(which)[0]
        tables[which + " (squared entries)"] = sorted(zip(sp.block_names, map(float, blocks)),
                                                      key=lambda t: -t[1])[:12]
    return tables


def _localised(net, x, n, apply_L, tol, node):
    """Per-pixel share of ``lambda_max``'s eigenvector on ``node``, and recurrences started on single pixels."""
    import sheaflinalg as sl

    sp = sl.spectrum(net, x, vectors=True, progress=False)
    v = sp.node_vector(node, "largest")
    share = (v.reshape(v.shape[0], -1) ** 2).sum(axis=0)
    block = next(b for b in sp.layout.free_blocks if b.name == node)
    columns = np.arange(block.slice.start, block.slice.stop).reshape(v.shape[0], -1)
    order = np.argsort(share)[::-1]
    rng = np.random.default_rng(5)
    starts = []
    for pixel in (order[0], order[1], order[-1]):
        v0 = np.zeros(n)
        v0[columns[:, pixel]] = rng.standard_normal(columns.shape[0])
        history, cpu, _ = _timed(lambda: _Recorded(n, tol, v0).run(apply_L))
        starts.append({"pixel": int(pixel), "share": float(share[pixel]), "products": len(history),
                       "value": history[-1][0], "cpu": cpu})
    return {"node": node, "lambda_max": float(sp.lambda_max[0]), "shares": share.tolist(), "starts": starts}


def _report(out):
    print(f"{out['model']} side {out['side']}: N = {out['n_free']:,}, tol {out['tol']:g}, "
          f"load {out['load_before']:.1f}/{out['load_after']:.1f}")
    for key in ("lambda_max", "lambda_min_arpack", "lambda_min_lanczos"):
        r = out[key]
        print(f"  {key:<20} products {r['products']:>6}  value {r['value']:.10g}  CPU {r['cpu']:.1f} s "
              f"({r['cpu'] / r['products'] / out['forward_cpu']:.1f} forward passes a product)  wall {r['wall']:.1f} s")
        for step in _steps(len(r.get("history", []))):
            theta, estimate = r["history"][step]
            print(f"      step {step + 1:>6}: theta {theta:.12g}  estimate {estimate:.2e}")
        if "ritz" in r:
            print("      largest Ritz values (estimate): " + ", ".join(f"{t:.10g} ({e:.1e})" for t, e in r["ritz"]))
    local = out.get("localised")
    if local:
        print(f"  lambda_max {local['lambda_max']:.10f}: its squared norm on the pixels of {local['node']}: "
              + ", ".join(f"{v:.2g}" for v in local["shares"]))
        for start in local["starts"]:
            print(f"      started on pixel {start['pixel']} (share {start['share']:.2g}): {start['products']} products, "
                  f"stops at {start['value']:.10f} (CPU {start['cpu']:.1f} s)")
    for which, table in out.get("energy", {}).items():
        if table:
            print(f"  {which}: " + ", ".join(f"{e} {v:.3g}" for e, v in table))


def _steps(m):
    return sorted({s for s in [9, 19, 49, 99, 149, 199, 299, 399, 499, 699, 999, 1499, 1999, m - 1] if 0 <= s < m})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--energy", action="store_true")
    parser.add_argument("--localise", default=None, metavar="NODE", help="a convolutional node, e.g. layer2.0.relu_2")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    out = measure(args.model, args.side, args.tol, args.energy, args.localise)
    _report(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
