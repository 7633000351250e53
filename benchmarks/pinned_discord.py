"""The pinned discord of graph networks at two revisions: seconds and outcomes (issues 32/33).  Asserts nothing.

Workloads, each pinned to one-hot labels (the hard case: a softmax output cannot reach them, so the
pinned equilibrium is far from the forward pass and many samples end on switching surfaces):

* ``cnn``: the image CNN of ``benchmarks/image_training.py`` (conv-relu-maxpool-conv-relu-linear, no conv
  biases, imported from torch, softmax output) on its stroke images (most pixels exactly 0), ``--samples``
  of them;
* ``warmup``: the small 1-D CNN of ``sheaflinalg warmup`` (convolution, ReLU, residual sum, max and average
  pooling, softmax) on six Gaussian inputs;
* ``vit``: the MNIST-1D ViT of the case study (untrained, seed 3; identity output: the logits pinned to the
  one-hot labels) on ``--samples`` MNIST-1D test signals.

Every revision runs in a fresh child process (``PYTHONPATH`` at an exported copy, as ``before_after.py``),
the two alternating round by round; a warm-up call first (numba's cache); the figure is the median
seconds of ``--runs`` calls, with the samples settled (of which on a switching surface: ReLU coordinates
held at 0 or max-pool entries held equal) and the mean pinned discord.

Run: ``.venv/bin/python benchmarks/pinned_discord.py [--before main] [--after worktree] [--only cnn vit]``
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from before_after import export  # noqa: E402

WORKLOADS = ("cnn", "warmup", "vit")


def _setup(name, samples):
    """``(net, X, Y)`` of a workload."""
    import numpy as np

    import sheaflinalg as sl

    if name == "cnn":
        from image_training import stroke_images, torch_cnn
        X, Y = stroke_images(max(samples, 50), size=16, seed=0)
        net = sl.Network.from_torch(torch_cnn(0, 16, False), input_shape=(1, 16, 16)).replace(output="softmax")
        return net, X[:samples], Y[:samples]
    if name == "warmup":
        from sheaflinalg.commands.warmup import _graph_network
        rng = np.random.default_rng(2)
        X = rng.normal(size=(6, 8))
        return _graph_network(sl), X, np.eye(3)[rng.integers(0, 3, size=6)]
    import torch

    from sheaflinalg.reproduce import mnist1d_vit
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = mnist1d_vit.build(torch, torch.nn).eval()
    data = sl.tasks.mnist1d(n_samples=max(60, 2 * samples))
    return sl.Network.from_torch(model, input_shape=(1, 40)), data.X_test[:samples], data.Y_test[:samples]


def child(name, runs, samples):
    """Time ``runs`` pinned discords of one workload after a warm-up; print seconds and outcomes as JSON."""
    import numpy as np

    import sheaflinalg as sl

    net, X, Y = _setup(name, samples)
    sl.discord.pinned(net, X[:1], Y[:1])
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        pd = sl.discord.pinned(net, X, Y)
        times.append(time.perf_counter() - t)
    print(json.dumps({"seconds": times, "samples": int(X.shape[0]), "settled": int(pd.settled.sum()),
                      "sliding": int(sum(1 for s in pd.sliding if s)), "discord": float(np.mean(pd.total))}))


def measure(path, name, runs, samples):
    env = dict(os.environ, PYTHONPATH=path)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--runs", str(runs),
                          "--samples", str(samples)], env=env, cwd=path, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="main")
    parser.add_argument("--after", default="worktree")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="alternating child processes per revision")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.runs, args.samples)
    print(f"load average {os.getloadavg()[0]:.1f}; before = {args.before}, after = {args.after}")
    print(f"{'workload':<10}{'rev':<8}{'seconds':>9}{'settled':>9}{'sliding':>9}{'discord':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"before": export(args.before, tmp), "after": export(args.after, tmp)}
        for name in args.only:
            found = {"before": [], "after": []}
            for _ in range(args.rounds):
                for which in ("before", "after"):
                    found[which].append(measure(paths[which], name, args.runs, args.samples))
            for which, rows in found.items():
                r = rows[-1]
                seconds = statistics.median(t for row in rows for t in row["seconds"])
                print(f"{name:<10}{which:<8}{seconds:9.2f}{r['settled']:>5d}/{r['samples']:<3d}{r['sliding']:>9d}"
                      f"{r['discord']:11.5f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
