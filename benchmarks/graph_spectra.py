"""Spectra of graph networks (issue 22): ``sl.spectrum`` against ARPACK on the assembled Laplacian; prints only.

For each case, one input: ``sl.spectrum(net, x)`` (reduced system, ``lambda_min`` by Lanczos on
``L^{-1} = delta^{-1} delta^{-T}`` through the block substitutions, ``lambda_max`` by Lanczos on
``L``, both ends in lockstep, eigenvectors included), wall and CPU time of the process.  The
baseline in the same run: ``sl.assemble(net, x).laplacian_free`` (``L[Omega, Omega]`` as a sparse
matrix), a generic sparse LU of it (``scipy.sparse.linalg.splu``, COLAMD ordering) and
``eigsh(L, sigma=0)`` (ARPACK shift-invert through that LU, as scipy does it) for ``lambda_min``,
``eigsh(L, which="LA")`` for ``lambda_max``, at the same tolerance; the ratio of the totals.

Cases: the MNIST-1D CNN (input ``(1, 40)``), the CIFAR ResNet-20 of ``graph_forward.py`` on
inputs of 3x4x4 and 3x8x8 (the same weights: the network ends in a global average pool), and on
the real 3x32x32 input.  The baseline runs on the first three: at 8x8 (N = 42k) the LU already
has 78M nonzeros and takes minutes.  At 32x32 the nonzeros of ``L`` and of its LU are extrapolated
from the measured ones (``--assemble-16`` also assembles ``L`` at 16x16, about a minute and 2 GB,
to extrapolate from there) and the memory that path would need is printed.  Torch builds the
models (float64, eval mode, seeded weights and batch-norm statistics).  Run:
``.venv/bin/python benchmarks/graph_spectra.py [--quick] [--assemble-16]`` (``--quick``: the
MNIST-1D CNN and ResNet-20 at 4x4 only, a smoke test).
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
    """The assembled path; returns ``(total wall seconds, nnz of L, nnz of its LU, splu seconds, lambda_min,
    lambda_max)``."""
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
    return total, L.nnz, nnz_lu, t_lu, w_min[0], w_max[0]


def run_case(case, with_baseline):
    net, x = network(case)
    N = sl.Layout.for_network(net, reduced=True).n_free
    print(f"{case}: {len(net.graph.nodes)} nodes, {net.n_parameters} parameters, N = {N} free coordinates")
    if with_baseline == "assemble":
        L, wall, _ = clocked(lambda: sl.assemble(net, x, reduced=True).laplacian_free)
        print(f"  assemble {wall:.2f} s, {L.nnz} nonzeros (no LU)")
        return N, L.nnz, None, None
    sp, wall = ours(net, x)
    if not with_baseline:
        return None
    total, nnz, nnz_lu, t_lu, w_min, w_max = baseline(net, x)
    print(f"  ratio baseline / sl.spectrum: {total / wall:.1f}x;  |lambda_min - baseline| / lambda_min "
          f"{abs(sp.lambda_min[0] - w_min) / w_min:.1e}, lambda_max {abs(sp.lambda_max[0] - w_max) / w_max:.1e}")
    return N, nnz, nnz_lu, t_lu


def extrapolate(measured):
    """Print the nonzeros and memory of the assembled path at 3x32x32, extrapolated from the runs at
    4x4 and 8x8 (and 16x16 when assembled).  Low estimates: per doubling of the side, the nonzeros
    of ``L`` grow 4x (with the positions; the measured growth is larger on small maps, whose
    padding cuts windows), and the LU's fill ratio by its measured factor from 4x4 to 8x8 (fill
    grows with the size on a grid-like graph)."""
    (_, nnz4, lu4, t4), (_, nnz8, lu8, t8) = measured["resnet20@4"], measured["resnet20@8"]
    side = 16 if measured.get("resnet20@16") else 8
    nnz32 = measured[f"resnet20@{side}"][1] * 4 ** int(np.log2(32 // side))
    fill32 = (lu8 / nnz8) * ((lu8 / nnz8) / (lu4 / nnz4)) ** 2
    lu32 = nnz32 * fill32
    gib = 2 ** 30
    print(f"resnet20@32 assembled path, extrapolated from 3x{side}x{side} (low estimates): L at least "
          f"{nnz32 / 1e6:.0f}M nonzeros ({12 * nnz32 / gib:.1f} GiB in CSC), its LU about {lu32 / 1e6:.0f}M "
          f"nonzeros (fill {fill32:.0f}x, {12 * lu32 / gib:.0f} GiB before SuperLU's work space); the splu "
          f"time grew {t8 / t4:.0f}x from 4x4 to 8x8 ({t8:.0f} s)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the MNIST-1D CNN and ResNet-20 at 4x4 only")
    parser.add_argument("--assemble-16", action="store_true", help="also assemble L at 3x16x16 (no LU)")
    args = parser.parse_args(argv)
    cases = {"mnist1d_cnn": True, "resnet20@4": True}
    if not args.quick:
        cases.update({"resnet20@8": True, "resnet20@16": "assemble" if args.assemble_16 else None,
                      "resnet20@32": False})
    measured = {}
    for case in ("mnist1d_cnn", "resnet20@4"):     # load the compiled kernels before timing
        sl.spectrum(*network(case), progress=False)
    with blas_limit(1):         # both paths with one BLAS thread (sl.spectrum sets it itself)
        for case, with_baseline in cases.items():
            if with_baseline is not None:
                measured[case] = run_case(case, with_baseline)
    if "resnet20@8" in measured:
        extrapolate(measured)


if __name__ == "__main__":
    main()
