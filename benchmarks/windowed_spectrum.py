"""``lambda_max`` of one large image by windows against the plain recurrence (issue 34, branch spec224).

For one seeded input image of a torchvision model (the tests' zoo: random weights, seeded batch-norm
statistics, float64) at each ``--side``: ``sl.spectrum(net, x, vectors=False, method=M)`` for each
``--methods`` M (``arpack``: the plain Lanczos recurrence for ``lambda_max``, ``windows``:
:mod:`sheaflinalg.spectral.windowed`), each in a fresh process, in the order given.  Prints per run the
products (by phase for the windows), ``lambda_min``, ``lambda_max``, the windows' lower bound and
truncation, CPU seconds of the process (``time.process_time``), wall seconds, peak RSS and the load
average before/after, and the ratio of products and of CPU seconds against the ``arpack`` run of the
same side when one ran.  Run: ``.venv/bin/python benchmarks/windowed_spectrum.py --model resnet50
--sides 32 64 --methods windows arpack [--threads 2] [--json out.json]``.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_one(model, side, method, threads):
    """One spectrum in this process, as a dict."""
    sys.path.insert(0, HERE)
    from spectrum_convergence import _network

    import sheaflinalg as sl

    net, x = _network(model, side)
    load = os.getloadavg()[0]
    cpu, wall = time.process_time(), time.perf_counter()
    sp = sl.spectrum(net, x, vectors=False, method=method, threads=threads, progress=False)
    out = {"model": model, "side": side, "method": method, "threads": threads, "n_free": sp.layout.n_free,
           "cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall, "products": sp.n_operator,
           "lambda_min": float(sp.lambda_min[0]), "lambda_max": float(sp.lambda_max[0]),
           "condition": float(sp.condition[0]), "load": [load, os.getloadavg()[0]],
           "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    if sp.windows:
        report = sp.windows[0]
        out["windows"] = {key: getattr(report, key) for key in ("lower_bound", "window_value", "truncation",
                                                                 "period", "tilings", "windows", "products",
                                                                 "fallback")}
    return out


def _report(r, base):
    ratio = ""
    if base is not None and r is not base:
        ratio = f"  x plain: products {r['products'] / base['products']:.2f}, CPU {r['cpu'] / base['cpu']:.2f}"
    print(f"{r['model']} side {r['side']} {r['method']:<8} N={r['n_free']:,}: products {r['products']}, "
          f"CPU {r['cpu']:.1f} s, wall {r['wall']:.1f} s, peak {r['peak_gib']:.2f} GiB, load "
          f"{r['load'][0]:.1f}/{r['load'][1]:.1f}; lambda_min {r['lambda_min']:.6g}, lambda_max "
          f"{r['lambda_max']:.12g}, condition {r['condition']:.3g}{ratio}")
    w = r.get("windows")
    if w:
        print(f"    windows: period {w['period']}, {w['tilings']} tilings, {w['windows']} windows, products "
              f"{w['products']}, lower bound {w['lower_bound']:.12g}, best window {w['window_value']:.12g}, "
              f"truncation {w['truncation']:.2e}, fallback {w['fallback']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--sides", type=int, nargs="+", default=[32])
    parser.add_argument("--methods", nargs="+", default=["windows", "arpack"], choices=("windows", "arpack"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.model, args.sides[0], args.methods[0], args.threads)))
        return
    results = []
    for side in args.sides:
        runs = {}
        for method in args.methods:
            line = subprocess.run([sys.executable, __file__, "--one", "--model", args.model, "--sides", str(side),
                                   "--methods", method, "--threads", str(args.threads)],
                                  check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            runs[method] = json.loads(line)
            results.append(runs[method])
            _report(runs[method], runs.get("arpack"))
        if "arpack" in runs and "windows" in runs and args.methods.index("windows") == 0:
            _report(runs["windows"], runs["arpack"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
