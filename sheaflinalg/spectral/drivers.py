"""Spectral diagnostics of the restricted Laplacian ``L[Omega, Omega]`` (paper section 6.3, appendix E.3).

Per sample (each with its own activation pattern) :func:`spectrum` computes
``lambda_min`` (the paper's spectral gap ``lambda_1``), ``lambda_max``, the
condition number, optionally the ``k`` smallest / largest eigenpairs, and
from the eigenvectors the energy per block, per-neuron contributions and the
stability of the eigenvectors across samples.

Methods (``method="auto"`` picks the first that applies):

* ``"dense"``: small systems (``N <= dense_max``) are assembled as dense
  ``N x N`` matrices and diagonalised in one batched ``numpy.linalg.eigh``.
* ``"arpack"``: ARPACK (SciPy's, as in ``scipy.sparse.linalg.eigsh``) on
  linear operators, never an ``N x N`` matrix.  ``lambda_max``: Lanczos on
  ``v -> delta^T (delta v)``.  ``lambda_min``: Lanczos on
  ``L^{-1} = delta^{-1} delta^{-T}`` (shift-invert at 0), one block backward
  and one block forward substitution with the pattern's masks
  (:mod:`sheaflinalg.kernels.substitution`): no factorisation.  The two
  Lanczos runs advance in lockstep (:mod:`sheaflinalg.spectral.arpack_pair`), so that
  one kernel call serves both at every step
  (:meth:`CoboundaryOperator.apply_pair`).
* Systems whose ``delta_Omega`` is not square (pins, soft pins, reluctance
  edges; see :func:`spectrum_of_system`) use a sparse Cholesky factor of
  ``L[Omega, Omega]`` (:func:`sheaflinalg.sheaf.assembled.factor.cholesky`: CHOLMOD, SuperLU
  fallback) for the shift-invert.
"""

import numpy as np
import scipy.sparse as sp

from .._common.memory import BATCH_FLOOR, FLOAT, check_batch, check_memory
from .._common.progress import progress_bar, progress_iter
from .._common.threads import blas_limit, get_num_threads, resolve_threads
from .._common.validation import as_samples, check_bool, check_choice, check_int, check_optional_int, check_tol
from ..network.model import NetworkOverflowError, check_network
from ..sheaf.assembled.assembly import assemble
from ..sheaf.assembled.factor import cholesky
from ..sheaf.harmonic import harmonic_extension
from ..sheaf.layout import Layout
from ..sheaf.patterns import normalise_pattern, output_jacobian
from ..sheaf.assembled.system import check_system
from .arpack import arpack_extremes, arpack_samples, batched, pair_of, per_system
from .dense import dense_extremes, dense_laplacians
from .arpack_pair import problem_ncv
from .operators.graph_systems import (LANCZOS_MIN, distinct_graph_patterns, distinct_rows, graph_dense_laplacians,
                             graph_groups, graph_lanczos, graph_ncv, graph_operators, graph_pattern,
                             graph_weights)
from .operators.chain import CoboundaryOperator, typed_weights
from .result import SpectrumResult, fix_signs
from .windowed import WINDOW_VECTORS, check_windows, window_problems
from ..network.paths import CHAIN, GRAPH, engine

SYSTEMS = ("reduced", "free")
METHODS = ("auto", "dense", "arpack")
#: :func:`spectrum` also takes ``"windows"`` (graph networks, ``k=1``: :mod:`~sheaflinalg.spectral.windowed`).
SPECTRUM_METHODS = METHODS + ("windows",)
SOLVERS = ("auto", "substitution", "cholmod", "superlu")
DENSE_MAX = 200
# Default ARPACK tolerance on the relative Ritz residuals.  The eigenvalue error
# is of the order of the squared residual over the spectral gap, so 1e-8 gives
# eigenvalues far below 1e-9 relative (the tests check 1e-9 against dense eigh)
# for about 20% fewer operator applications than 1e-10.  The achieved residuals
# of ``L`` are reported in ``SpectrumResult.residuals``; for the smallest
# eigenpairs (Lanczos on ``L^{-1}``) that residual can exceed ``tol`` by up to
# the condition number.
TOL = 1e-8
# Work below these sizes runs on one thread by default: networks with fewer
# weights (the operator kernels split only matrices of at least
# ``kernels.substitution.PARALLEL_MIN`` entries anyway), dense batches with
# M * N**3 below THREADS_MIN_DENSE.
THREADS_MIN_WEIGHTS = 100_000
THREADS_MIN_DENSE = 2_000_000


def _augmented_blocks(layout, layout_free_index):
    """Blocks of an augmented system's free coordinates: the layout's blocks minus hard
    pins (as index arrays), and ``"x"`` for freed inputs."""
    blocks = []
    freed = np.flatnonzero(layout_free_index < 0)
    if freed.size:
        blocks.append(("x", freed))
    for b in layout.free_blocks:
        idx = np.flatnonzero((layout_free_index >= b.offset) & (layout_free_index < b.offset + b.size))
        if idx.size:
            blocks.append((b.name, idx))
    return blocks


def _distinct_patterns(masks, M):
    """``(first, inverse)``: one representative sample per distinct pattern, and each sample's pattern."""
    if M == 1:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return distinct_rows(np.packbits(np.concatenate([m.reshape(M, -1) for m in masks] + [np.ones((M, 1), bool)],
                                                    axis=1), axis=1))


def _choose_method(method, full, N, k, dense_max):
    """``"dense"`` or ``"arpack"`` for ``method`` (``"auto"``: dense up to ``dense_max``), or a clear error."""
    if full and method in ("arpack", "windows"):
        raise ValueError("full=True needs the dense method (method='dense' or 'auto')")
    if method == "auto":
        method = "dense" if (N <= dense_max or full) else "arpack"
    if method in ("arpack", "windows") and k >= N:
        raise ValueError(f"k={k} is too large for ARPACK: it needs k < N={N}; use method='dense'")
    return method


def _check_arpack_options(maxiter, ncv, k, n, method):
    """``maxiter >= 1`` and ``k < ncv <= n`` (ARPACK's rules), checked before any work."""
    maxiter = check_optional_int(maxiter, "maxiter")
    ncv = check_optional_int(ncv, "ncv")
    if ncv is not None and method == "arpack" and not min(k, n - 1) < ncv <= n:
        raise ValueError(f"ncv must satisfy k < ncv <= N (k={min(k, n - 1)}, N={n}), got {ncv}")
    return maxiter, ncv


#: Vectors of size ``N`` that the plain Lanczos recurrence of ``lambda_max`` keeps (its start, three of the
#: recurrence): what it counts for in the memory estimate instead of ARPACK's ``ncv``.
LANCZOS_VECTORS = 4


def _check_vector_memory(n_samples, N, k, vectors, ncv):
    """Refuse eigenvector requests (and ARPACK's Krylov spaces) that would not fit in memory, before any work."""
    krylov = sum(min(N, max(2 * k + 1, 20)) if n is None else n for n in (problem_ncv(ncv, i) for i in range(2)))
    krylov += 8      # vectors of size N, both ends
    n_bytes = FLOAT * N * (krylov + (2 * k * n_samples if vectors else 0))
    if n_bytes >= BATCH_FLOOR:
        check_memory(n_bytes, f"the spectra of {n_samples} input(s) of N={N} stalk coordinates, "
                     f"{2 * k if vectors else 0} eigenvectors each", "ask for fewer eigenpairs (smaller k), "
                     "vectors=False, or fewer inputs at a time")


def _check_output_map_memory(n_out):
    """A chain's ARPACK operator (one at a time) holds its output map as a dense ``n_out x n_out``
    matrix, and a copy while it is built (its kernels read it so, even when it is diagonal or zero)."""
    n_bytes = 2 * FLOAT * n_out * n_out
    if n_bytes >= BATCH_FLOOR:
        check_memory(n_bytes, f"the dense {n_out} x {n_out} output map of a chain's spectrum operator",
                     "it does not depend on the samples: a network with fewer outputs needs less")


def _check_dense_memory(n_systems, N, vectors):
    """Refuse a dense batch whose matrices, eigenvectors and LAPACK copies would not fit in memory."""
    per = N * N * FLOAT * (3 if vectors else 2)
    check_memory(n_systems * per, f"the dense spectra of {n_systems} distinct systems of size N={N}",
                 "use method='arpack' (memory grows with N, not N**2), vectors=False, or fewer inputs "
                 "at a time")


class IllConditionedSpectrumError(FloatingPointError, ValueError):
    """The smallest eigenvalues of ``L[Omega, Omega]`` are below the rounding level of the dense solver."""


def _check_laplacian_range(named):
    """Refuse weights ``[(label, W)]`` whose squares (the blocks ``W^T W`` of ``L[Omega, Omega]``) overflow float64."""
    for label, W in named:
        largest = max(float(W.max()), -float(W.min()))  # no temporary |W| for big layers
        with np.errstate(over="ignore"):
            top = np.float64(largest) ** 2 * W.shape[0]
        if not np.isfinite(top):
            raise NetworkOverflowError(f"{label} is too large for the spectrum: its entries (largest {largest:.3g}) "
                             f"squared overflow float64 in L[Omega,Omega] = delta^T delta; rescale the network")


def _check_resolved(smallest, largest, N, method):
    """A dense ``eigh`` resolves eigenvalues only down to about ``N eps lambda_max``; below that,
    ``lambda_min`` (positive by structure) is rounding noise: refuse to report it."""
    floor = N * np.finfo(np.float64).eps * largest[:, 0]
    bad = smallest[:, 0] <= floor
    if np.any(bad):
        s = int(np.argmax(bad))
        raise IllConditionedSpectrumError(
            f"L[Omega,Omega] is too ill-conditioned for the {method} eigensolver: for input {s}, lambda_max = "
            f"{largest[s, 0]:.3e} and the computed lambda_min = {smallest[s, 0]:.3e} lies below the rounding "
            f"level N*eps*lambda_max = {floor[s]:.3e} ({int(bad.sum())} input(s) affected); the condition "
            f"number exceeds 1/(N eps). Use method='arpack' (shift-invert by block substitution resolves "
            f"small eigenvalues) or rescale the weights")


def _check_k(k, n):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"k={k} is larger than the system allows: L[Omega, Omega] has N={n} eigenvalues")
    return int(k)


def spectrum(net, X, k=1, vectors=True, system="reduced", pattern=None, method="auto",
             full=False, tol=TOL, maxiter=None, ncv=None, dense_max=DENSE_MAX, threads=None,
             progress=True, pins=None, soft_pins=None, reluctance=None, solver="auto", window=None):
    """Extreme eigenvalues of ``L[Omega, Omega]`` of every sample's activation pattern.

    A graph network's Laplacian is applied node by node (its nodes in
    topological order are the blocks, ``yhat`` last in the ``"free"``
    system); the result's :meth:`~SpectrumResult.node_vector` and
    :meth:`~SpectrumResult.channel_energy` give the eigenvectors in each
    node's own shape and their energy per channel.  The ARPACK problems of a
    group of samples advance together, their products in one batch.

    Parameters
    ----------
    net : Network
        A chain or a graph network.
    X : array_like, shape (n_samples, n_0) or (n_0,)
        A graph network also takes ``(n_samples, *input_shape)``.
    k : int
        Number of smallest and of largest eigenpairs per sample.
    vectors : bool
        Also return the eigenvectors (needed by the energy and stability diagnostics).  A large graph
        network's ``lambda_max`` then costs about half the products with ``L`` without them (its
        Lanczos recurrence is not run a second time to build the eigenvector).
    system : {"reduced", "free"}
        ``"reduced"``: the block-tridiagonal Laplacian of appendix A on
        ``z1, a1, ..., z(k+1)`` (the paper's choice for identity output; it
        does not depend on phi).  ``"free"``: the unreduced ``L[Omega, Omega]``
        with ``yhat`` and the output edge, linearised at the pattern's
        harmonic extension for a nonlinear output (``-J_phi`` in ``e_y``).
    pattern : sequence of array_like or dict, optional
        Frozen activation pattern (see :func:`sheaflinalg.assemble`; a graph
        network: ``{node: array}``, masks and max-pool positions);
        default: each sample's forward-pass pattern.
    method : {"auto", "dense", "arpack", "windows"}
        ``"auto"``: dense for ``N <= dense_max`` (or ``full=True``), ARPACK otherwise.
        ``"windows"`` (a graph network, ``k=1``): ``lambda_min`` as ``"arpack"``, ``lambda_max`` by many
        small principal problems at once, refined on the whole ``L``
        (:mod:`~sheaflinalg.spectral.windowed`): for large images whose top of the spectrum is a
        cluster of pixel-local modes (ResNet-50), where the plain recurrence needs thousands of
        products.  It is not chosen automatically: on networks without such a cluster (ResNet-18)
        and on small images it costs more products than ``"arpack"``.  Guarantees: ``lambda_max`` is
        an eigenvalue of ``L`` within ``tol``, at least a rigorous lower bound, and the largest up to
        the windows' truncation; what was done is in the result's ``windows``.
    full : bool
        Also return the whole spectrum (dense method only).
    tol : float
        ARPACK relative tolerance on the Ritz residuals (default 1e-8, see
        :data:`TOL`; the achieved residuals of ``L`` are in ``residuals``).
    maxiter, ncv : int, optional
        ARPACK iteration limit and Krylov subspace size (scipy's defaults).  A large graph network's
        ``lambda_max`` (``k=1``, no ``ncv`` given) is found by the plain Lanczos recurrence instead
        (:mod:`~sheaflinalg.spectral.lanczos`: its top is often clustered, where ARPACK's
        reorthogonalisation costs more than the products), at most ``20 * maxiter`` products; smaller
        ones use a Krylov space of :data:`~sheaflinalg.spectral.operators.graph_systems.LARGEST_NCV`.
    dense_max : int
        Largest ``N`` the automatic choice diagonalises densely.
    threads : int, optional
        Any positive integer.  ARPACK path: the row blocks of every big weight
        matrix are shared among this many threads in the operator kernels
        (when that is measured to be faster than one thread: on a busy
        machine it is not); a graph network: the products with ``L`` and
        ``L^{-1}`` of a step run in two threads; dense path: chunks of the
        batch run in this many threads.  Default: :func:`sheaflinalg.get_num_threads` when the work
        is large enough to pay for it, else 1.  The results do not depend on
        it, bit for bit.  The parallel kernels use numba's threading layer
        (OpenMP when installed); a child forked after they ran uses the
        serial kernels (GNU OpenMP cannot start threads there).
    progress : bool
        Progress bar over the samples (ARPACK path; a graph network: over the groups of samples, or over
        the Lanczos steps when one group of a large system is all there is, e.g. one ImageNet image).
    pins, soft_pins, reluctance : optional
        Hard pins, soft pins and reluctance edges (format:
        :mod:`sheaflinalg.sheaf.pins.specs`).  With any of them the system is assembled
        (:func:`sheaflinalg.assemble`) and handed to
        :func:`spectrum_of_system`: ``delta_Omega`` is then tall and the
        shift-invert uses a sparse Cholesky factor.
    solver : {"auto", "cholmod", "superlu"}
        Factorisation of the augmented systems (see :func:`spectrum_of_system`).
    window : int, optional
        ``method="windows"``: the side of the windows' cells in input pixels (default
        :func:`~sheaflinalg.spectral.window_tiling.window_level`: the stride of the node with the
        largest map).

    Returns
    -------
    SpectrumResult

    Raises
    ------
    SpectrumConvergenceError
        ARPACK did not converge; the message gives the achieved residual.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=42)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(10, 2))
    >>> sp = sl.spectrum(net, X)
    >>> bool(np.all(sp.lambda_min <= 1.0) and np.all(sp.condition >= 1.0))
    True
    >>> sp.block_names
    ['z1', 'a1', 'z2']
    """
    check_network(net, graphs=True)
    path = engine(net)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    check_choice(system, SYSTEMS, "system")
    check_choice(method, SPECTRUM_METHODS, "method")
    pinned = pins is not None or soft_pins is not None or reluctance is not None
    check_windows(method, path == GRAPH, k, pinned, window)
    vectors, full, progress = check_bool(vectors, "vectors"), check_bool(full, "full"), check_bool(progress, "progress")
    tol = check_tol(tol, "tol")
    dense_max = check_int(dense_max, "dense_max", 0)
    reduced = system == "reduced"
    check_choice(solver, ("auto", "cholmod", "superlu"), "solver")
    if solver != "auto" and not pinned:
        raise ValueError(f"solver={solver!r} has no effect without pins, soft_pins or reluctance (an unpinned "
                         "spectrum shifts and inverts by block substitution); drop it")
    if pinned:
        s = assemble(net, X, pattern=pattern, reduced=reduced, pins=pins, soft_pins=soft_pins,
                     reluctance=reluctance)
        return spectrum_of_system(s, k=k, vectors=vectors, solver=solver, method=method, full=full,
                                  tol=tol, maxiter=maxiter, ncv=ncv, dense_max=dense_max, progress=progress)
    layout = Layout.for_network(net, reduced=reduced)
    N = layout.n_free
    k = _check_k(k, N)
    if path == GRAPH:
        _check_laplacian_range(graph_weights(net.graph))
        stalks = sum(net.graph.sizes.values())
    else:
        _check_laplacian_range([(f"W{l}", W) for l, W in enumerate(net.weights, start=1)])
        stalks = sum(net.dims[1:])
    method = _choose_method(method, full, N, k, dense_max)
    maxiter, ncv = _check_arpack_options(maxiter, ncv, k, N, method)
    lanczos = path == GRAPH and method == "arpack" and graph_lanczos(ncv, N, k, tol)
    if lanczos and not vectors:
        lanczos = "value"        # no second run of the recurrence for an eigenvector nobody asked for
    reports = None
    if method == "windows":
        lanczos, reports = window_problems(net.graph, layout, vectors, window)
    if path == GRAPH:
        ncv = graph_ncv(ncv, N, k)
    threads = None if threads is None else resolve_threads(threads)
    # the forward pass and its patterns, the output Jacobians (diagonals; dense for softmax), and per
    # sample 2k eigenvalues (and eigenvectors of size N)
    krylov = (LANCZOS_VECTORS, problem_ncv(ncv, 1)) if lanczos else ncv     # the recurrence keeps a few vectors
    if method == "windows":
        krylov = (WINDOW_VECTORS, problem_ncv(ncv, 1))
    _check_vector_memory(X.shape[0], N, k, vectors, krylov if method in ("arpack", "windows") else 0)
    n_out = net.n_outputs
    jacobian = 0 if reduced else n_out * (n_out if net.output == "softmax" else 1)
    check_batch(X.shape[0], FLOAT * (3 * stalks + jacobian + 2 * k * (2 + (N if vectors else 0))), "the spectra")
    if path == CHAIN and method == "arpack":
        _check_output_map_memory(n_out)
    # One BLAS thread throughout: ARPACK's and the batches' small BLAS calls gain
    # nothing from threads, and OpenBLAS's idle threads spin for a while after
    # a threaded call, taking the core the kernels' second thread needs.
    with blas_limit(1):
        if path == GRAPH:
            result = _graph_spectrum(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv,
                                     threads, progress, layout, lanczos)
        else:
            result = _spectrum_of_patterns(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv,
                                           threads, progress, layout)
    result.path = path
    result.windows = reports
    return result


def _spectrum_of_patterns(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv, threads,
                          progress, layout):
    """:func:`spectrum` of a chain after validation."""
    M = X.shape[0]
    if pattern is None:
        zs, _ = net.forward_states(X)
        masks = [z >= 0 for z in zs[:-1]]
        zout = zs[-1]
    else:
        masks = normalise_pattern(net, pattern, M)
        zout = None
        if not reduced and net.output != "identity":
            zout = harmonic_extension(net, X, pattern=masks).preactivations[-1]
    if reduced:
        jacobians = None
    elif net.output == "identity":
        jacobians = [np.ones(net.dims[-1])] * M
    else:
        jacobians = [output_jacobian(net.output, z) for z in zout]

    # L depends on the sample only through its pattern (and J): diagonalise each distinct one once.
    if reduced or net.output == "identity":
        first, inverse = _distinct_patterns(masks, M)
    else:
        first, inverse = np.arange(M), np.arange(M)
    masks = [m[first] for m in masks]
    if jacobians is not None:
        jacobians = [jacobians[i] for i in first]

    def arpack(threads):
        weights = typed_weights(net)
        return per_system(lambda u: CoboundaryOperator(net, [m[u] for m in masks], None if reduced else jacobians[u],
                                                       weights=weights, threads=threads),
                          first, layout.n_free, k, tol, maxiter, ncv)
    return _solve_distinct(lambda: dense_laplacians(net, masks, jacobians, layout, first.size), arpack,
                           [[u] for u in range(first.size)], net.n_parameters, first, inverse, layout, reduced,
                           method, k, vectors, full, threads, progress)


def _graph_spectrum(net, X, k, vectors, reduced, pattern, method, full, tol, maxiter, ncv, threads, progress,
                    layout, lanczos):
    """:func:`spectrum` of a graph network after validation: its distinct patterns, node by node
    (``lanczos``: :func:`~sheaflinalg.spectral.operators.graph_systems.graph_lanczos`)."""
    M = X.shape[0]
    pattern, jacobians = graph_pattern(net, X, pattern, reduced)
    # L depends on the sample only through its pattern (and J): diagonalise each distinct one once.
    if reduced or net.output == "identity":
        first, inverse = distinct_graph_patterns(pattern, M)
    else:
        first, inverse = np.arange(M), np.arange(M)
    pattern = {name: rows[first] for name, rows in pattern.items()}
    if jacobians is not None:
        jacobians = jacobians[first]
    N = layout.n_free
    groups = graph_groups(first.size, N, k, ncv)
    # one group (one large image): a bar over its Lanczos steps instead of one over the groups
    steps = progress and method in ("arpack", "windows") and len(groups) == 1 and N >= LANCZOS_MIN
    with progress_bar(None, steps, "spectrum", unit="step") as bar:
        return _solve_distinct(lambda: graph_dense_laplacians(net, X[first], pattern, reduced),
                               lambda threads: batched(graph_operators(net, pattern, jacobians, threads), first, N, k,
                                                       tol, maxiter, ncv, lanczos, bar.update if steps else None),
                               groups, net.n_parameters, first, inverse, layout, reduced,
                               method, k, vectors, full, threads, progress)


def _solve_distinct(dense, arpack, groups, n_parameters, first, inverse, layout, reduced, method, k, vectors, full,
                    threads, progress):
    """The eigenpairs of the distinct systems ``first``, spread back to the samples by ``inverse``.

    ``dense()``: their Laplacians as an (U, N, N) array; ``arpack(threads)``: the ``run`` of
    :func:`~sheaflinalg.spectral.arpack.arpack_samples` for the system ``groups``.
    """
    N, U = layout.n_free, first.size
    cores = get_num_threads()
    if method == "dense":
        _check_dense_memory(U, N, vectors)
        L = dense()
        if threads is None:
            threads = cores if U * N ** 3 >= THREADS_MIN_DENSE else 1
        out = dense_extremes(L, k, vectors, full, threads)
        _check_resolved(out[0], out[1], N, "dense")
        n_op = 0
    else:
        if threads is None:
            threads = cores if n_parameters >= THREADS_MIN_WEIGHTS else 1
        ws, wl, Vs, Vl, residuals, n_op = arpack_samples(arpack(threads), groups, N, k, vectors, progress)
        out = (ws, wl, Vs, Vl, None, residuals)
    ws, wl, Vs, Vl, full_w, residuals = (None if a is None else a[inverse] for a in out)
    blocks = [(b.name, b.slice) for b in layout.free_blocks]
    return SpectrumResult(ws, wl, Vs, Vl, full_w, residuals, layout, blocks, method,
                          "reduced" if reduced else "free", n_op, U)


def spectrum_of_system(system, k=1, vectors=True, solver="auto", method="auto", full=False,
                       tol=TOL, maxiter=None, ncv=None, dense_max=DENSE_MAX, progress=True):
    """Extreme eigenvalues of ``L[Omega, Omega]`` of an assembled :class:`~sheaflinalg.SheafSystem`.

    Works for any system whose ``laplacian_free`` is block diagonal over the
    samples with equal blocks, including augmented systems (pins, soft pins,
    reluctance edges) whose ``delta_free`` is tall.

    Parameters
    ----------
    system : SheafSystem (or any object with ``delta_free``, ``laplacian_free``, ``n_samples``)
    solver : {"auto", "substitution", "cholmod", "superlu"}
        Shift-invert for ``lambda_min``: ``"substitution"`` (block
        substitutions; needs a square, unpinned ``delta_free`` of a network),
        or a sparse Cholesky factor of each sample's ``L[Omega, Omega]``.
        ``"auto"``: substitution when possible, else CHOLMOD (SuperLU fallback).
    Other parameters as in :func:`spectrum`.

    Returns
    -------
    SpectrumResult

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> s = sl.assemble(net, np.ones((3, 2)), reduced=True)
    >>> sp = spectrum_of_system(s, method="arpack", solver="superlu", progress=False)
    >>> sp.method, sp.lambda_min.shape
    ('superlu', (3,))
    """
    check_system(system)
    check_choice(solver, SOLVERS, "solver")
    check_choice(method, METHODS, "method")
    vectors, full = check_bool(vectors, "vectors"), check_bool(full, "full")
    tol = check_tol(tol, "tol")
    dense_max = check_int(dense_max, "dense_max", 0)
    D = sp.csr_matrix(system.delta_free)
    M = int(system.n_samples)
    if M < 1:
        raise ValueError("the system has no samples")
    if D.shape[1] % M:
        raise ValueError(f"delta_free has {D.shape[1]} columns, not a multiple of {M} samples")
    N = D.shape[1] // M
    k = _check_k(k, N)
    augmented = hasattr(system, "layout_free_index")
    square = (D.shape[0] == D.shape[1] and not augmented
              and getattr(system, "network", None) is not None and getattr(system, "pattern", None) is not None)
    if solver == "substitution" and not square:
        raise ValueError("solver='substitution' needs a square delta_free of an unpinned network system; "
                         "use 'cholmod' or 'superlu'")
    method = _choose_method(method, full, N, k, dense_max)
    maxiter, ncv = _check_arpack_options(maxiter, ncv, k, N, method)
    layout = getattr(system, "layout", None)
    if augmented:
        blocks = _augmented_blocks(layout, np.asarray(system.layout_free_index))
    elif layout is not None and layout.n_free == N:
        blocks = [(b.name, b.slice) for b in layout.free_blocks]
    else:
        layout, blocks = None, [("free", slice(0, N))]
    if method == "arpack" and square and (solver == "auto" or engine(system.network) == GRAPH):
        net = system.network
        reduced = system.reduced
        X = system.X
        pattern = system.pattern
        return spectrum(net, X, k=k, vectors=vectors, system="reduced" if reduced else "free",
                        pattern=pattern, method="arpack", tol=tol, maxiter=maxiter, ncv=ncv,
                        progress=progress)
    Lfull = sp.csr_matrix(system.laplacian_free)
    if method == "dense":
        _check_dense_memory(M, N, vectors)
        L = np.stack([Lfull[s * N:(s + 1) * N, s * N:(s + 1) * N].toarray() for s in range(M)])
        ws, wl, Vs, Vl, full_w, residuals = dense_extremes(L, k, vectors, full)
        return SpectrumResult(ws, wl, Vs, Vl, full_w, residuals, layout, blocks, "dense",
                              "reduced" if getattr(system, "reduced", False) else "free", 0, M, _system_path(system))
    ws, wl, Vs, Vl, residuals, used, n_op = _arpack_of_system(system, D, Lfull, M, N, k, vectors, solver, tol,
                                                            maxiter, ncv, progress)
    return SpectrumResult(ws, wl, Vs, Vl, None, residuals, layout, blocks, used,
                          "reduced" if getattr(system, "reduced", False) else "free", n_op, M, _system_path(system))


def _system_path(system):
    """The path of an assembled system's network (:func:`~sheaflinalg.network.paths.engine`), or None."""
    network = getattr(system, "network", None)
    return None if network is None else engine(network)


def _arpack_of_system(system, D, Lfull, M, N, k, vectors, solver, tol, maxiter, ncv, progress):
    """ARPACK on each sample's block of an assembled system: ``L v`` from its coboundary rows, the
    shift-invert by block substitution or a sparse Cholesky factor.  Returns ``(smallest, largest,
    vectors_smallest, vectors_largest, residuals, method used, operator applications)``."""
    ws, wl = np.empty((M, k)), np.empty((M, k))
    Vs = np.empty((M, k, N)) if vectors else None
    Vl = np.empty((M, k, N)) if vectors else None
    residuals = np.empty((M, 2))
    Dc = D.tocsc()
    used = solver
    n_op = 0
    for s in progress_iter(range(M), M, progress, "spectrum"):
        cols = slice(s * N, (s + 1) * N)
        Ds = Dc[:, cols].tocsr()
        Ds = Ds[np.diff(Ds.indptr) > 0]
        DsT = Ds.T.tocsr()
        Ls = Lfull[cols, cols]
        counter = [0]

        def apply_L(v, Ds=Ds, DsT=DsT):
            counter[0] += 1
            return DsT @ (Ds @ v)

        if solver == "substitution":
            net = system.network
            op = CoboundaryOperator(net, [m[s] for m in system.pattern], None if system.reduced else
                                    output_jacobian(net.output, system.linearisation_point[s]))
            apply_inv = op.laplacian_solve
            used = "arpack"
        else:
            backend = "auto" if solver == "auto" else solver
            f = cholesky(Ls, backend=backend)
            used = f.backend

            def apply_inv(v, f=f):
                counter[0] += 1
                return f.solve(v)

        a, Va, b, Vb, res = arpack_extremes(pair_of(apply_L, apply_inv), apply_L, apply_inv, N, k, tol,
                                         maxiter, ncv, s)
        ws[s], wl[s] = a, b
        residuals[s] = res
        n_op += counter[0]
        if vectors:
            Vs[s] = fix_signs(Va.T)
            Vl[s] = fix_signs(Vb.T)
    return ws, wl, Vs, Vl, residuals, used, n_op
