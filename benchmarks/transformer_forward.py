"""Transformers and ConvNeXt at full size: the harmonic extension against torch's own forward pass (issue 32).

Cases: torchvision's ConvNeXt-T and ViT-B/16 (random weights and batch-norm statistics, built by
``tests/helpers/zoo.py`` without torchvision's compiled operators), float64, eval mode, on a batch of
``--batch`` standard normal 3x224x224 images.  Each is imported with ``sl.Network.from_torch`` (torch.fx,
or torch.export where torch.fx cannot trace), then torch's forward pass and ``sl.harmonic_extension`` run
``--runs`` times each, interleaved round by round, with the same thread count for both (torch's own count
is set to it and restored).  The claim is the ratio of the medians; the goal is at most 1.5x.  Prints,
asserts nothing.  Run::

    .venv/bin/python benchmarks/transformer_forward.py [--models convnext_tiny,vit_b_16] [--batch 2] [--runs 5]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from bench_threads import timings  # noqa: E402
from helpers import zoo  # noqa: E402

import sheaflinalg as sl  # noqa: E402
from sheaflinalg._common.threads import available_cores, num_threads  # noqa: E402

MODELS = ("convnext_tiny", "vit_b_16")
SHAPE = (3, 224, 224)
NATIVE = {"vit_b_16": {"image_size": 224}}      # the zoo builds ViTs small; these benchmarks run them at full size


def compare(name, batch, runs, threads):
    """Print torch's forward pass against the harmonic extension for one model; returns the ratio of medians."""
    import torch

    model = zoo.build(name, **NATIVE.get(name, {}))[0].double().eval()
    start = time.perf_counter()
    net = sl.Network.from_torch(model, input_shape=SHAPE)
    imported = time.perf_counter() - start
    X = np.random.default_rng(1).standard_normal((batch, *SHAPE))
    Xt = torch.from_numpy(X)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with num_threads(threads), torch.no_grad():
            reference = model(Xt).numpy()
            ours = sl.harmonic_extension(net, X).output         # compiles, warms the caches
            ts = timings({"torch": lambda: model(Xt), "harmonic_extension": lambda: sl.harmonic_extension(net, X)},
                         runs)
    finally:
        torch.set_num_threads(before)
    error = float(np.max(np.abs(ours - reference)) / np.max(np.abs(reference)))
    med = {k: float(np.median(v)) for k, v in ts.items()}
    ratio = med["harmonic_extension"] / med["torch"]
    print(f"{name}: batch {batch}, threads {threads}, import {imported:.1f} s, relative error {error:.1e}")
    for k, v in ts.items():
        print(f"  {k:20s} min {v.min():7.3f} s  median {med[k]:7.3f} s")
    print(f"  ratio of medians {ratio:.2f}x (goal <= 1.5x)")
    return ratio


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated torchvision model names")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=available_cores())
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        try:
            compare(name, args.batch, args.runs, args.threads)
        except sl.UnsupportedModelError as exc:      # a model the importer refuses is reported, not fatal
            print(f"{name}: refused: {str(exc).splitlines()[0]}")


if __name__ == "__main__":
    main()
