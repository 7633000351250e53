"""Spectra of graph networks (issue 22): ``sl.spectrum`` against ARPACK on the assembled Laplacian; prints only.

For each case, one input: ``sl.spectrum(net, x)`` (reduced system, ``lambda_min`` by Lanczos on
``L^{-1} = delta^{-1} delta^{-T}`` through the block substitutions, ``lambda_max`` by Lanczos on
``L``, both ends in lockstep, eigenvectors included), wall and CPU time of the process.  The
baseline in the same run: ``sl.assemble(net, x).laplacian_free`` (``L[Omega, Omega]`` as a sparse
matrix), a generic sparse LU of it (``scipy.sparse.linalg.splu``, COLAMD ordering) and
``eigsh(L, sigma=0)`` (ARPACK shift-invert through that LU, as scipy does it) for ``lambda_min``,
``eigsh(L, which="LA")`` for ``lambda_max``, at the same tolerance; the ratio of the totals.

Cases: the MNIST-1D CNN (input ``(1, 40)``), the CIFAR ResNet-20 of ``graph_forward.py`` on
inputs of 3x8x8 and 3x16x16 (the same weights: the network ends in a global average pool), and on
the real 3x32x32 input.  At 32x32 the baseline is not run by default (``--baseline-32`` runs it):
the nonzeros of ``L`` and of its LU are measured at 8x8 and 16x16 and extrapolated, and the memory
that path would need is printed.  Torch builds the models (float64, eval mode, seeded weights and
batch-norm statistics).  Run: ``.venv/bin/python benchmarks/graph_spectra.py [--quick] [--baseline-32]``
(``--quick``: the MNIST-1D CNN and ResNet-20 at 8x8 only, a smoke test).
"""

import argparse
import time

import numpy as np
import scipy.sparse.linalg as spla

import graph_forward as gf
import sheaflinalg as sl
from sheaflinalg._common.threads import blas_limit
from sheaflinalg.spectral import TOL


def network(case):
    """``(net, x)``: a case's network (weights seeded before the model is built) and one input."""
    torch = gf._torch()
    torch.manual_seed(0)            # the layers' initial weights come from torch's global generator
    if case == "mnist1d_cnn":
        model, shape = gf.prepared(gf.mnist1d_cnn(), seed=0), (1, 40)
    else:
        side = int(case.split("@")[1])
        model, shape = gf.prepared(gf.resnet20(), seed=0), (3, side, side)
    net = sl.Network.from_torch(model, input_shape=shape)
    return net, np.random.default_rng(1).standard_normal((1,) + shape)


def clocked(fn):
    """``(result, wall seconds, CPU seconds of the process)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def ours(net, x):
    sp, wall, cpu = clocked(lambda: sl.spectrum(net, x, method="arpack", progress=False))
    print(f"  sl.spectrum          {wall:8.2f} s wall {cpu:8.2f} s CPU   lambda_min {sp.lambda_min[0]:.10g}  "
          f"lambda_max {sp.lambda_max[0]:.10g}  ({sp.n_operator} products with L or L^-1, residuals "
          f"{sp.residuals[0, 0]:.1e} / {sp.residuals[0, 1]:.1e})")
    return sp, wall


def baseline(net, x):
    """The assembled path; returns ``(total wall seconds, nnz of L, nnz of its LU, lambda_min, lambda_max)``."""
    L, t_asm, _ = clocked(lambda: sl.assemble(net, x, reduced=True).laplacian_free.tocsc())
    lu, t_lu, _ = clocked(lambda: spla.splu(L))
    nnz_lu = lu.L.nnz + lu.U.nnz
    inverse = spla.LinearOperator(L.shape, matvec=lu.solve, dtype=np.float64)
    v0 = np.random.default_rng(12345).standard_normal(L.shape[0])
    (w_min, _), t_min, _ = clocked(lambda: spla.eigsh(L, k=1, sigma=0, OPinv=inverse, tol=TOL, v0=v0))
    (w_max, _), t_max, _ = clocked(lambda: spla.eigsh(L, k=1, which="LA", tol=TOL, v0=v0))
    total = t_asm + t_lu + t_min + t_max
    print(f"  assembled + splu     {total:8.2f} s wall: assemble {t_asm:.2f} s ({L.nnz} nonzeros), splu {t_lu:.2f} s "
          f"({nnz_lu} nonzeros, fill {nnz_lu / L.nnz:.1f}x), eigsh sigma=0 {t_min:.2f} s, eigsh LA {t_max:.2f} s; "
          f"lambda_min {w_min[0]:.10g}  lambda_max {w_max[0]:.10g}")
    return total, L.nnz, nnz_lu, w_min[0], w_max[0]


def run_case(case, with_baseline):
    net, x = network(case)
    N = sl.Layout.for_network(net, reduced=True).n_free
    print(f"{case}: {len(net.graph.nodes)} nodes, {net.n_parameters} parameters, N = {N} free coordinates")
    sp, wall = ours(net, x)
    if not with_baseline:
        return None
    total, nnz, nnz_lu, w_min, w_max = baseline(net, x)
    print(f"  ratio baseline / sl.spectrum: {total / wall:.1f}x;  |lambda_min - baseline| / lambda_min "
          f"{abs(sp.lambda_min[0] - w_min) / w_min:.1e}, lambda_max {abs(sp.lambda_max[0] - w_max) / w_max:.1e}")
    return N, nnz, nnz_lu


def extrapolate(measured):
    """Print the nonzeros and memory of the assembled path at 3x32x32 from the 8x8 and 16x16 runs."""
    (n8, nnz8, lu8), (n16, nnz16, lu16) = measured["resnet20@8"], measured["resnet20@16"]
    nnz32 = nnz16 * nnz16 / nnz8                     # the nonzeros grow with the positions (x4 a doubling)
    fill32 = (lu16 / nnz16) ** 2 / (lu8 / nnz8)      # the fill ratio grew by this factor from 8 to 16
    lu32 = nnz32 * fill32
    gib = 2 ** 30
    print(f"resnet20@32 assembled path, extrapolated: L about {nnz32 / 1e6:.0f}M nonzeros "
          f"({12 * nnz32 / gib:.1f} GiB in CSC), its LU about {lu32 / 1e6:.0f}M nonzeros (fill {fill32:.1f}x, "
          f"{12 * lu32 / gib:.1f} GiB, before SuperLU's work space)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the MNIST-1D CNN and ResNet-20 at 8x8 only")
    parser.add_argument("--baseline-32", action="store_true", help="also run the assembled path at 3x32x32")
    args = parser.parse_args(argv)
    cases = ["mnist1d_cnn", "resnet20@8"] + ([] if args.quick else ["resnet20@16", "resnet20@32"])
    measured = {}
    with blas_limit(1):         # both paths with one BLAS thread (sl.spectrum sets it itself)
        for case in cases:
            measured[case] = run_case(case, case != "resnet20@32" or args.baseline_32)
    if "resnet20@16" in measured and not args.baseline_32:
        extrapolate(measured)


if __name__ == "__main__":
    main()
