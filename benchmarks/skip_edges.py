"""The least-squares harmonic extension under ``skip_encoding="edges"``: direct against iterative; prints only.

The direct solver assembles ``delta_Omega`` and factorises ``L[Omega,Omega]`` (sparse Cholesky); the
iterative one runs CGLS on ``B = [I; E T^{-1}]``, matrix-free, preconditioned by the square unit lower
triangular block ``T`` (:mod:`sheaflinalg.sheaf.skip_edges.iterative`).  Per case: the seconds of each
(rounds interleaved, minimum and median), the CGLS steps, the relative difference of the two results
``||w_it - w_direct|| / ||w_direct||`` and ``max |w_it - w_direct| / max |w_direct|``, and with
``--spectrum`` Lanczos estimates of ``lambda_max(B^T B) = 1 + ||K||^2`` (``lambda_min >= 1`` is proven).

Cases (torch builds the models: float64, eval mode, seeded weights and batch-norm statistics, as
``graph_forward.py``): ``cnn3@16``, the CIFAR ResNet of ``graph_forward.py`` cut to one basic block per
stage (widths 16/32/64, the second and third with 1x1 convolution shortcuts) on one 3x16x16 image;
``resnet20@8`` and ``resnet20@32``, ResNet-20 on one 3x8x8 and one 3x32x32 image.  The direct solver
is not run on ``resnet20@32`` (676k coordinates: its factor would not fit; ``--direct-32`` tries).
Run: ``.venv/bin/python benchmarks/skip_edges.py [--quick] [--rounds R] [--spectrum]`` (``--quick``:
``resnet20@8`` only, one round).
"""

import argparse
import os
import time

import numpy as np
import scipy.sparse.linalg as spla

import graph_forward as gf
import sheaflinalg as sl
from sheaflinalg.sheaf.patterns import output_jacobian
from sheaflinalg.sheaf.skip_edges.iterative import PreconditionedEdges, iterative_extension


def network(case):
    """``(net, X)``: a case's network and one input, flat."""
    torch = gf._torch()
    torch.manual_seed(0)
    model = gf.resnet20()
    name, side = case.split("@")
    if name == "cnn3":
        model.blocks = torch.nn.Sequential(*[model.blocks[i] for i in (0, 3, 6)])   # the first block of each stage
    side = int(side)
    net = sl.Network.from_torch(gf.prepared(model, seed=0), input_shape=(3, side, side))
    return net, np.random.default_rng(1).standard_normal((1, 3 * side * side))


def direct(net, X):
    return sl.harmonic_extension(net, X, skip_encoding="edges", solver="direct").free


def iterative(net, X):
    h, report = iterative_extension(net.graph, X)
    return h.free, report


def spectrum(net, X):
    """Lanczos estimate of ``lambda_max(B^T B)`` and the rows of ``E``."""
    h = net.evaluate(X)
    op = PreconditionedEdges(net.graph, h.pattern, output_jacobian(net.output, h.values[net.graph.output_node]))
    n = op.layout.n_free
    normal = spla.LinearOperator((n, n), lambda v: v + op.k_transpose(op.k(v.reshape(1, -1))).ravel(),
                                 dtype=np.float64)
    return float(spla.eigsh(normal, k=1, which="LA", tol=1e-3, return_eigenvectors=False)[0]), op.n_extra


def run(case, rounds, with_direct, with_spectrum):
    net, X = network(case)
    fns = {"iterative": lambda: iterative(net, X)}
    if with_direct:
        fns["direct"] = lambda: direct(net, X)
    times, results = {k: [] for k in fns}, {}
    for _ in range(rounds):
        for name, fn in fns.items():           # interleaved rounds
            t = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t)
    w, report = results["iterative"]
    print(f"{case}: {w.shape[1]} free coordinates, {report.n_extra} extra rows (E), load {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        print(f"  {name:10s} min {min(ts):8.2f} s  median {np.median(ts):8.2f} s  ({rounds} rounds)")
    print(f"  CGLS steps {report.iterations}, ||B^T r|| / ||y|| = {report.relative.max():.1e}")
    if with_direct:
        ref = results["direct"]
        t = times["direct"]
        print(f"  direct / iterative: {np.median(t) / np.median(times['iterative']):.1f}x (medians)")
        print(f"  relative difference: 2-norm {np.linalg.norm(w - ref) / np.linalg.norm(ref):.1e}, "
              f"max {np.abs(w - ref).max() / np.abs(ref).max():.1e}")
    if with_spectrum:
        lam, _ = spectrum(net, X)
        print(f"  lambda(B^T B) in [1, {lam:.4g}] (lambda_max by Lanczos, tol 1e-3): ||K|| = {np.sqrt(lam - 1):.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="resnet20@8 only, one round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per case (default 3)")
    parser.add_argument("--spectrum", action="store_true", help="estimate lambda_max(B^T B) too")
    parser.add_argument("--direct-32", action="store_true", help="try the direct solver on resnet20@32 too")
    args = parser.parse_args()
    cases = ["resnet20@8"] if args.quick else ["resnet20@8", "cnn3@16", "resnet20@32"]
    rounds = 1 if args.quick else args.rounds
    for case in cases:
        big = case == "resnet20@32"
        run(case, 1 if big else rounds, not big or args.direct_32, args.spectrum)


if __name__ == "__main__":
    main()
