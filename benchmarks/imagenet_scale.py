"""Cost of the spectrum and of the pinned discord of torchvision ResNets as the image grows (issue 34, part 5).

For each image side (default 32, 64, 128, 224) and each case, one input image in a fresh process (so that its
peak resident memory is its own): ``sl.spectrum(net, x)`` (reduced system; ``lambda_min`` by Lanczos on
``L^{-1} = delta^{-1} delta^{-T}``, ``lambda_max`` on ``L``, eigenvectors, and the edge energies of both
eigenvectors, which sum to the eigenvalues) and ``sl.discord.pinned(net, x, y)`` (the 1000-class head pinned
``--pin-distance`` (default 0.1) away from its own output along a seeded random direction, or to a one-hot label
with ``--pin-distance 0``: many held coordinates, so conjugate gradients on the k x k system, see
``sheaflinalg.discord.pinning.schur``; its progress bars on stderr, its outcome and conjugate-gradient steps per
frozen solve printed; the JSON row adds per frozen solve what it holds, ``held``, and the columns of its Lagrange
system, ``columns``: fewer when levels over dead ReLUs are one coordinate each).  The baseline, in the same process and run: ``sheaflinalg``'s own
forward pass of the image (median of 3), which the times are printed as ratios of.  Wall seconds, the peak
resident memory of the process, and the load average before and after each case are printed; ``--figure``
draws the curves (seconds and peak memory against the number of pixels) with the package's figure helper.

``resnet50:values`` (any model) is the spectrum without eigenvectors (``vectors=False``: ``lambda_min``,
``lambda_max`` and the condition number, in about half the products with ``L``).  ``--threads 1 2`` runs every
case once per thread count (``sl.spectrum(threads=...)``), the counts interleaved at each side so that they
share the load, and prints the ratio of each count's wall time to the first's; the goal's runs:
``--sides 224 --cases resnet18:values resnet18:spectrum resnet50:values --threads 1 2`` (the spectrum's bar
over its Lanczos steps on stderr).

Torch builds the models (random weights, seeded batch-norm statistics, float64).  Run:
``.venv/bin/python benchmarks/imagenet_scale.py [--sides 32 64] [--cases resnet18:spectrum resnet18:pinned]
[--max-iter 20] [--figure docs/img/imagenet_scale.png]``; ``--budget S`` skips the larger sides of a case once
one of its runs took more than ``S`` seconds; ``--rows OUT --figure F`` redraws the figure from the JSON rows an
earlier run printed.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _network(model, side):
    """The sheaflinalg network of a torchvision model (tests' zoo: seeded weights and statistics) at ``side``."""
    sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
    from helpers import zoo

    import sheaflinalg as sl

    torch_model, _ = zoo.build(model)
    return sl.Network.from_torch(torch_model.double(), input_shape=(3, side, side))


def run_one(model, side, what, max_iter, distance=0.1, threads=None):
    """One case in this process: a dict of its numbers (printed as JSON by ``--one``)."""
    import sheaflinalg as sl

    net = _network(model, side)
    x = np.random.default_rng(1).standard_normal((1, 3 * side * side))
    forward = []
    for _ in range(3):
        t = time.perf_counter()
        net.forward(x)
        forward.append(time.perf_counter() - t)
    out = {"model": model, "side": side, "what": what, "n_free": int(sum(net.graph.sizes.values())),
           "forward": float(np.median(forward)), "threads": threads}
    t, cpu = time.perf_counter(), time.process_time()
    if what in ("spectrum", "values"):
        sp = sl.spectrum(net, x, vectors=what == "spectrum", threads=threads, progress=True)
        out["seconds"] = time.perf_counter() - t
        out.update(lambda_min=float(sp.lambda_min[0]), lambda_max=float(sp.lambda_max[0]),
                   condition=float(sp.condition[0]), products=int(sp.n_operator),
                   residuals=[float(r) for r in sp.residuals[0]])
        if what == "spectrum":
            energy = sl.spectral.edge_energy(net, x, sp)
            top = sorted(energy, key=lambda e: -energy[e][0])[:3]
            out["top_edges"] = [[e, float(energy[e][0])] for e in top]
    else:
        steps, solves, columns = _count_solves()
        pd = sl.discord.pinned(net, x, _pin(net, x, distance), max_iter=max_iter, progress=True)
        out["seconds"] = time.perf_counter() - t
        out.update(outcome=str(pd.outcome[0]), settled=bool(pd.settled[0]), total=float(pd.total[0]),
                   solves=len(solves), cg_steps=steps, held=[k for k, _ in solves], columns=columns,
                   flips=[f for _, f in solves],
                   sliding=len(pd.sliding[0]), damped=int(pd.damped[0]), distance=distance)
    out["cpu_seconds"] = time.process_time() - cpu
    out["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def _count_solves():
    """``(steps, solves, columns)``, filled as the pinned discord runs: the conjugate-gradient steps of every
    ``schur_cg`` call, per frozen solve the coordinates and pairs it holds (the outputs included) and the
    activations flipped since the one before, and per frozen solve the columns of its Lagrange system (fewer than
    it holds when levels over dead ReLUs are one coordinate each; one image)."""
    from sheaflinalg.discord.pinning import graph as pinning

    steps, solves, columns, last = [], [], [], {}
    original, frozen, columns_of = pinning.schur_cg, pinning._MatrixFree.__call__, pinning._MatrixFree._columns

    def counted_columns(self, surface):
        index, minus = columns_of(self, surface)
        columns.append(int(index.size))
        return index, minus

    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        steps.append(result[2])
        return result

    def solve(self, X, Y, pattern, surface=(), values=None):
        flips = sum(int(np.sum(p != last[n])) for n, p in pattern.items() if n in last and p.shape == last[n].shape)
        last.update({n: p.copy() for n, p in pattern.items()})
        solves.append((self.output.size + len(surface), flips))
        return frozen(self, X, Y, pattern, surface, values)
    pinning.schur_cg, pinning._MatrixFree.__call__, pinning._MatrixFree._columns = counted, solve, counted_columns
    return steps, solves, columns


def _pin(net, x, distance):
    """The pinned output: ``distance`` away from the network's own along a seeded random direction (0: one-hot)."""
    if distance == 0:
        y = np.zeros((1, net.n_outputs))
        y[0, 0] = 1.0
        return y
    u = np.random.default_rng(2).standard_normal((1, net.n_outputs))
    return net.forward(x) + distance * u / np.linalg.norm(u)


def _load():
    return os.getloadavg()[0]


def run_case(model, side, what, max_iter, distance, threads=None):
    """One case in a fresh process, with the load before and after (its progress bars on this stderr)."""
    before = _load()
    proc = subprocess.run([sys.executable, __file__, "--one", model, str(side), what, str(max_iter), str(distance),
                           str(threads or 0)], stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        return {"model": model, "side": side, "what": what, "threads": threads,
                "error": f"exit status {proc.returncode}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["load"] = (before, _load())
    return out


def figure(rows, path):
    """Seconds and peak memory against the number of pixels, one line per case."""
    sys.path.insert(0, os.path.join(HERE, os.pardir))
    from sheaflinalg.plotting.figure import new_figure, save_figure

    fig, (ax_t, ax_m) = new_figure(1, 2, figsize=(9, 3.5))
    for key in sorted({(r["model"], r["what"], str(r.get("threads") or "")) for r in rows}):
        done = [r for r in rows if (r["model"], r["what"], str(r.get("threads") or "")) == key and "seconds" in r]
        pixels = [r["side"] ** 2 for r in done]
        ax_t.plot(pixels, [r["seconds"] for r in done], "o-", label=" ".join(key[:2]) + (f" {key[2]} threads" if key[2] else ""))
        ax_m.plot(pixels, [r["peak_gib"] for r in done], "o-", label=" ".join(key[:2]) + (f" {key[2]} threads" if key[2] else ""))
    for ax, label in ((ax_t, "wall seconds"), (ax_m, "peak RSS (GiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pixels (side^2)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    save_figure(fig, path)
    print(f"figure: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, nargs="+", default=[0],
                        help="sl.spectrum's threads= (0: its default); several: each case once per count")
    parser.add_argument("--sides", type=int, nargs="+", default=[32, 64, 128, 224])
    parser.add_argument("--cases", nargs="+", default=["resnet18:spectrum", "resnet18:pinned"])
    parser.add_argument("--max-iter", type=int, default=20, help="pattern updates of the pinned discord")
    parser.add_argument("--pin-distance", type=float, default=0.1,
                        help="the pinned output's distance from the network's own (0: a one-hot label)")
    parser.add_argument("--budget", type=float, default=None, help="skip larger sides after a slower run")
    parser.add_argument("--figure", default=None)
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--rows", default=None, help="redraw --figure from rows printed by an earlier run")
    args = parser.parse_args()
    if args.rows:
        with open(args.rows) as f:
            figure([json.loads(line) for line in f if line.startswith("{")], args.figure)
        return
    if args.one:
        model, side, what, max_iter, distance, threads = args.one
        print(json.dumps(run_one(model, int(side), what, int(max_iter), float(distance), int(threads) or None)))
        return
    if any(t < 0 for t in args.threads):
        parser.error("--threads takes counts >= 1 (0: the library's default)")
    rows = _run_all(args)
    _table(rows, args.threads)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.figure:
        figure(rows, args.figure)


def _run_all(args):
    """Every case at every side and thread count: sides outer, cases and counts inner (interleaved under the
    same load); a case's larger sides are skipped once one of its runs took more than ``--budget``."""
    rows, over = [], set()
    for side in sorted(args.sides):
        for case in args.cases:
            for threads in args.threads:
                if case in over:
                    continue
                model, what = case.split(":")
                row = run_case(model, side, what, args.max_iter, args.pin_distance, threads)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.budget is not None and row.get("seconds", float("inf")) > args.budget:
                    over.add(case)
    return rows


def _table(rows, counts):
    """The rows as a table, with each run's wall time over the same case's at the first thread count."""
    first = {(r["model"], r["what"], r["side"]): r["seconds"] for r in rows
             if "seconds" in r and (r["threads"] or 0) == counts[0]}
    print(f"\n{'case':<20}{'side':>6}{'thr':>4}{'N':>11}{'seconds':>10}{'ratio':>7}{'cpu s':>8}{'x forward':>11}"
          f"{'products':>9}{'peak GiB':>10}{'load':>12}  outcome")
    for r in rows:
        if "seconds" not in r:
            print(f"{r['model'] + ' ' + r['what']:<20}{r['side']:>6}{r.get('threads') or 0:>4}  error: {r['error']}")
            continue
        base = first.get((r["model"], r["what"], r["side"]))
        ratio = f"{r['seconds'] / base:.2f}" if base else ""
        print(f"{r['model'] + ' ' + r['what']:<20}{r['side']:>6}{r['threads'] or 0:>4}{r['n_free']:>11}"
              f"{r['seconds']:>10.1f}{ratio:>7}{r['cpu_seconds']:>8.1f}{r['seconds'] / r['forward']:>11.0f}"
              f"{r.get('products', ''):>9}{r['peak_gib']:>10.2f}{r['load'][0]:>6.1f}/{r['load'][1]:.1f}  "
              f"{r.get('outcome', '')} {r.get('cg_steps', '')}")


if __name__ == "__main__":
    main()
