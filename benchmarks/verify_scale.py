"""``sl.verify`` at ImageNet scale: torchvision's ResNet-50 (random weights) on one 3x224x224 image, matrix-free.

Builds the model in float64 and eval mode (tests/helpers/zoo.py), imports it with ``sl.Network.from_torch``,
then times, in interleaved rounds, torch's own forward pass (the baseline) and ``sl.verify(net, X)`` (whose
``backend="auto"`` verifies without assembling: the assembled system would need hundreds of GiB).  Prints
each round, the medians and minima, their ratio, the verdict and the peak resident memory of the process
(the model, its import and the verification together).

Run: ``PYTHONPATH=. python benchmarks/verify_scale.py [--model resnet50] [--size 224] [--rounds 3]``.
"""

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from helpers import zoo  # noqa: E402

import sheaflinalg as sl  # noqa: E402


def _timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def _peak_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="a torchvision classifier (default: resnet50)")
    parser.add_argument("--size", type=int, default=224, help="image height and width (default: 224)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: 3)")
    args = parser.parse_args(argv)
    import torch

    model, _ = zoo.build(args.model)
    model = model.double().eval()
    shape = (3, args.size, args.size)
    net, seconds = _timed(sl.Network.from_torch, model, input_shape=shape)
    print(f"{args.model} on {shape}: {len(net.graph.nodes)} nodes, {sum(net.graph.sizes.values())} free coordinates; "
          f"import {seconds:.1f} s, peak RSS so far {_peak_gib():.2f} GiB")
    X = np.random.default_rng(0).normal(size=(1, *shape))
    times = {"torch": [], "verify": []}
    for r in range(args.rounds):
        with torch.no_grad():
            _, t = _timed(model, torch.from_numpy(X))
        times["torch"].append(t)
        report, t = _timed(sl.verify, net, X)
        times["verify"].append(t)
        print(f"round {r}: torch {times['torch'][-1]:.2f} s, verify {t:.2f} s ({report.factor_backend}): "
              f"{report.status}")
    median = {k: float(np.median(v)) for k, v in times.items()}
    least = {k: float(np.min(v)) for k, v in times.items()}
    print(report)
    print(f"verify: median {median['verify']:.2f} s, min {least['verify']:.2f} s; torch forward: median "
          f"{median['torch']:.2f} s, min {least['torch']:.2f} s; ratio verify/torch: median "
          f"{median['verify'] / median['torch']:.1f}, min {least['verify'] / least['torch']:.1f}")
    print(f"peak RSS {_peak_gib():.2f} GiB; load average {os.getloadavg()}")
    return 0 if report.status == "PASSED" else 1


if __name__ == "__main__":
    sys.exit(main())
