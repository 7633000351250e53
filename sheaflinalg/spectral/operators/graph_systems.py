"""The pieces of :func:`sheaflinalg.spectrum` specific to graph networks: patterns, operators, dense Laplacians.

Each sample's ``L[Omega, Omega]`` depends on it through its pattern (masks and
max-pool argmax positions) and, for the ``"free"`` system with a nonlinear
output, through ``J_phi`` at its output node.  The ARPACK path applies ``L``
and ``L^{-1}`` node by node (:class:`GraphLaplacianOperator`); the dense path
(small graphs) takes the blocks of the assembled ``laplacian_free``.
"""

import numpy as np

from ...network.graph.forward import evaluate
from ...sheaf.assembled.assembly import assemble
from ...sheaf.matrix_free.node_maps import NodeMaps
from ...sheaf.patterns import normalise_graph_pattern, output_jacobian
from ..arpack_pair import problem_ncv
from .graph import GraphLaplacianOperator
from ..lanczos import MIN_TOL


def distinct_rows(keys):
    """``(first, inverse)`` of the distinct rows of a 2-D uint8 array: one representative row per
    distinct row (the first), and each row's representative number.

    Examples
    --------
    >>> first, inverse = distinct_rows(np.array([[1, 2], [0, 0], [1, 2]], dtype=np.uint8))
    >>> first.tolist(), inverse.tolist()
    ([1, 0], [1, 0, 1])
    """
    keys = np.ascontiguousarray(keys)
    keys = keys.view(np.dtype((np.void, keys.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def distinct_graph_patterns(pattern, M):
    """:func:`distinct_rows` of the samples' patterns ``{node: (M, n) array}`` (masks and argmax alike)."""
    if M == 1:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    parts = [np.ascontiguousarray(a).reshape(M, -1).view(np.uint8) for a in pattern.values()]
    return distinct_rows(np.concatenate(parts + [np.ones((M, 1), np.uint8)], axis=1))


def graph_pattern(net, X, pattern, reduced):
    """The validated pattern ``{node: (M, n) array}`` and the output Jacobians (None for the reduced
    system) of the inputs ``X`` (flat, checked by the caller): their diagonals ``(M, n_out)`` for an
    elementwise output, ``(M, n_out, n_out)`` for softmax (estimated by the caller before its work).

    Default pattern: the forward pass's; a frozen ``pattern`` is linearised at its own harmonic
    extension (as :func:`sheaflinalg.assemble` does).
    """
    graph = net.graph
    M = X.shape[0]
    if pattern is not None:
        pattern = normalise_graph_pattern(graph, pattern, M)
    if reduced:
        return (evaluate(graph, X).pattern if pattern is None else pattern), None
    if net.output == "identity":
        state_pattern = evaluate(graph, X).pattern if pattern is None else pattern
        return state_pattern, np.ones((M, graph.n_outputs))
    state = evaluate(graph, X, pattern)
    z = state.values[graph.output_node]
    return state.pattern, output_jacobian(net.output, z)


def graph_operators(net, pattern, jacobians, threads=1):
    """``make(group)``: the :class:`GraphLaplacianOperator` of the systems ``group`` (a list of rows of
    ``pattern`` and ``jacobians``), one :class:`NodeMaps` for all."""
    maps = NodeMaps(net.graph)

    def make(group):
        return GraphLaplacianOperator(net.graph, {name: rows[group] for name, rows in pattern.items()},
                                      None if jacobians is None else jacobians[group], maps, threads)
    return make


#: Krylov space (``ncv``) of the ``lambda_max`` problem (Lanczos on ``L``) of a graph network when the
#: caller gives none.  The top of a graph network's spectrum can be tightly clustered (ResNet-20 on
#: one 3x32x32 input: the two largest eigenvalues 7.5e-5 apart relatively), where ARPACK's default
#: of 20 restarts so often that it needs 1,221 products with ``L`` at ``tol=1e-8``; with 40 it needs
#: 721 (60: 691, but each step orthogonalises against more vectors, more CPU in all).
LARGEST_NCV = 40


def graph_ncv(ncv, N, k):
    """The ``ncv`` of a graph network's two ARPACK problems: the caller's for both, or (by default)
    ``(ncv of lambda_max, None)``: :data:`LARGEST_NCV` (within ARPACK's ``k < ncv <= N``) for
    ``L`` and ARPACK's default for ``L^{-1}`` (its spectrum's top is well separated).

    Examples
    --------
    >>> graph_ncv(None, 10**6, 1), graph_ncv(None, 12, 1), graph_ncv(25, 10**6, 1)
    ((40, None), (12, None), 25)
    """
    if ncv is not None:
        return ncv
    return min(N, max(2 * min(k, N - 1) + 1, LARGEST_NCV)), None


#: The smallest ``N`` whose ``lambda_max`` problem runs the plain Lanczos recurrence by default.
#: Below it ARPACK's orthogonalisation is cheap next to the products and per-step overheads dominate.
LANCZOS_MIN = 20_000


def graph_lanczos(ncv, N, k, tol):
    """Whether the ``lambda_max`` problems of a graph network run the plain Lanczos recurrence
    (:class:`~sheaflinalg.spectral.lanczos.LargestLanczos`): for one eigenpair, ``N >=`` :data:`LANCZOS_MIN`,
    a tolerance of at least :data:`~sheaflinalg.spectral.lanczos.MIN_TOL` and no ``ncv`` from the caller
    (who then asked for ARPACK's Krylov space).

    Examples
    --------
    >>> graph_lanczos(None, 675_978, 1, 1e-8), graph_lanczos(40, 675_978, 1, 1e-8), graph_lanczos(None, 5_000, 1, 1e-8)
    (True, False, False)
    """
    return ncv is None and k == 1 and N >= LANCZOS_MIN and tol >= MIN_TOL


#: Memory of the ARPACK work spaces of one group of systems advanced together (bytes), and the
#: largest group: the groups depend on the sizes alone, never on the thread count.
GROUP_BYTES = 32 * 2**20
MAX_GROUP = 64


def graph_groups(U, N, k, ncv):
    """The systems ``0 .. U-1`` cut into consecutive groups whose ARPACK problems advance together.

    Examples
    --------
    >>> graph_groups(5, 1000, 1, None)
    [[0, 1, 2, 3, 4]]
    >>> [len(g) for g in graph_groups(3, 10**6, 1, None)]
    [1, 1, 1]
    """
    krylov = sum((min(N, max(2 * k + 1, 20)) if n is None else n) + 5     # both problems' vectors
                 for n in (problem_ncv(ncv, i) for i in range(2)))
    size = max(1, min(MAX_GROUP, GROUP_BYTES // (8 * N * krylov)))
    return [list(range(lo, min(U, lo + size))) for lo in range(0, U, size)]


def graph_dense_laplacians(net, X, pattern, reduced):
    """``L[Omega, Omega]`` of every sample of ``X`` under ``pattern`` as a dense (M, N, N) array
    (small graphs only), from the assembled sheaf."""
    system = assemble(net, X, pattern=pattern, reduced=reduced)
    L = system.laplacian_free.tocsr()
    M = X.shape[0]
    N = L.shape[0] // M
    return np.stack([L[s * N:(s + 1) * N, s * N:(s + 1) * N].toarray() for s in range(M)])


def graph_weights(graph):
    """``[(label, array)]`` of the parameters that enter ``delta``: weights of linear and
    convolution nodes, batch-norm scales."""
    named = []
    for node in graph.nodes:
        for key in ("weight", "scale"):
            if key in node.params:
                named.append((f"{node.name}.{key}", node.params[key]))
    return named
