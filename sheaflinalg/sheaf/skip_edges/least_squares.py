"""The harmonic extension under ``skip_encoding="edges"``: a least-squares solution, not the forward pass.

With one edge per parent of an ``add`` or ``concat`` node
(:mod:`sheaflinalg.sheaf.skip_edges.encoding`) ``delta_Omega`` is tall, and the
harmonic extension minimises the discord ``||delta_Omega w + delta_U u + c||``
(``c`` the linearised output edge's offset): the normal equations
``L[Omega,Omega] w = -delta_Omega^T (delta_U u + c)``, solved with one sparse
Cholesky factorisation (:mod:`sheaflinalg.sheaf.assembled.factor`, ``solver="direct"``) or,
matrix-free, by conjugate gradients preconditioned with the square unit lower
triangular block that forward substitution inverts
(:mod:`sheaflinalg.sheaf.skip_edges.iterative`, ``solver="iterative"``; ``"auto"`` picks it
for a graph network with additions from :data:`ITERATIVE_FROM` free coordinates per sample).  ``L[Omega,Omega]`` is
positive definite because ``delta_Omega`` has full column rank
(:mod:`sheaflinalg.sheaf.verification.rank`).  At an ``add`` node the two edges pull
``x_v`` towards each parent: the result is a compromise, not their sum.

The public :func:`harmonic_extension` lives here, above the assembly that the
least-squares extension needs; with ``skip_encoding="sum"`` it is
:func:`sheaflinalg.sheaf.harmonic.harmonic_extension` (forward substitution).
"""

import numpy as np

from ..._common.validation import as_samples, check_choice, check_optional_int, check_tol
from ...network.model import check_network
from ...network.paths import GRAPH, engine
from ..assembled.assembly import assemble, check_pattern
from ..assembled.factor import check_backend, cholesky
from ..harmonic import HarmonicExtension
from ..harmonic import harmonic_extension as forward_substitution
from .encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding, is_split
from .iterative import TOL, iterative_extension

#: The values of ``solver``.
SOLVERS = ("auto", "direct", "iterative")
#: ``solver="auto"`` is iterative on a graph network with additions from this many free coordinates per
#: sample (benchmarks/skip_edges.py: below it the factorisation takes milliseconds).
ITERATIVE_FROM = 2000


def resolved_solver(net, solver):
    """``"direct"`` or ``"iterative"``: what ``solver`` (checked) means for ``net``; a chain, or a network
    without additions (``delta_Omega`` square), is solved by its forward substitution either way.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> resolved_solver(sl.Network.random([2, 3, 1], seed=0), "auto")
    'direct'
    >>> resolved_solver(sl.Network.random([2, 3, 1], seed=0), "cg")
    Traceback (most recent call last):
    ...
    ValueError: unknown solver 'cg'; expected one of 'auto', 'direct', 'iterative'
    """
    check_choice(solver, SOLVERS, "solver")
    if engine(net) != GRAPH or not any(is_split(node, "edges") for node in net.graph.nodes):
        return "direct"
    if solver == "auto":
        return "iterative" if _n_free(net) >= ITERATIVE_FROM else "direct"
    return solver


def _n_free(net):
    return sum(net.graph.sizes[node.name] for node in net.graph.nodes) + net.n_outputs


def solve_normal_equations(system, backend="auto"):
    """The least-squares free cochain of an assembled system, shape ``(n_samples, n_free)``.

    Raises
    ------
    numpy.linalg.LinAlgError
        ``L[Omega,Omega]`` is not positive definite to working precision.
    """
    rhs = -(system.delta_free.T @ (system.delta_boundary @ system.u + system.edge_offset))
    try:
        factor = cholesky(system.laplacian_free, backend=backend)
    except np.linalg.LinAlgError as exc:
        raise np.linalg.LinAlgError("the least-squares harmonic extension needs delta_Omega of full column rank: "
                                    f"L[Omega,Omega] is not positive definite to working precision ({exc})") from exc
    return factor.solve(rhs).reshape(system.n_samples, -1)


def least_squares_extension(net, X, pattern=None, backend="auto", solver="auto", tol=TOL):
    """The harmonic extension of the boundary data ``(x, 1, ..., 1)`` under ``skip_encoding="edges"``.

    Parameters
    ----------
    net : Network
        A chain or a graph network (on a network without ``add``/``concat``
        the result is the forward pass up to rounding).
    X : array_like, shape (n_samples, n_inputs), (n_samples, *input_shape) or (n_inputs,)
    pattern : sequence or dict, optional
        Frozen pattern (see :func:`sheaflinalg.assemble`); default: the forward pass's.
    backend : {"auto", "cholmod", "superlu"}
        Sparse Cholesky backend (``solver="direct"``).
    solver : {"auto", "direct", "iterative"}
        ``"direct"``: a sparse Cholesky factorisation of ``L[Omega,Omega]``;
        ``"iterative"``: preconditioned CGLS, matrix-free (graph networks;
        :func:`~sheaflinalg.sheaf.skip_edges.iterative.iterative_extension`);
        ``"auto"``: iterative from :data:`ITERATIVE_FROM` free coordinates.
    tol : float
        The iterative solver's stopping tolerance (relative, see
        docs/graph-networks.md: the result agrees with the direct solve to about ``1e-12``).

    Returns
    -------
    HarmonicExtension
        ``free`` the least-squares cochain in the layout's free order;
        ``pattern`` and ``self_consistent`` are those of the pattern's forward
        substitution (the restriction maps are frozen by it).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.network.graph.nodes import Node
    >>> W = np.array([[2.0]]); b = np.zeros(1)
    >>> net = sl.Network.from_nodes((1,), [Node("l", "linear", ["x"], params={"weight": W, "bias": b}),
    ...                                    Node("s", "add", ["l", "x"])])
    >>> float(net.forward([[1.0]])[0, 0])                 # s = 2 x + x
    3.0
    >>> h = least_squares_extension(net, [[1.0]])
    >>> [round(float(v), 6) for v in h.free[0]]           # l, s, yhat: edges l - 2x, s - l, s - x
    [1.666667, 1.333333, 1.333333]
    """
    check_backend(backend)
    check_tol(tol, "tol", zero=False)
    if resolved_solver(net, solver) == "iterative":
        return _iterative(net, X, pattern, tol)
    system = assemble(net, X, pattern, skip_encoding="edges")
    free = solve_normal_equations(system, backend)
    lay = system.layout
    forward = system.harmonic
    return HarmonicExtension(free=free, output=free[:, lay.free(lay.output_block)], pattern=forward.pattern,
                             self_consistent=forward.self_consistent, layout=lay)


def _iterative(net, X, pattern, tol):
    """The iterative solver's extension (inputs checked as :func:`sheaflinalg.assemble` checks them)."""
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    pattern = None if pattern is None else check_pattern(net, pattern, X.shape[0])
    return iterative_extension(net.graph, X, pattern, tol=tol)[0]


def harmonic_extension(net, X, pattern=None, threads=None, skip_encoding=DEFAULT_SKIP_ENCODING, solver="auto"):
    """Harmonic extension of the boundary data ``(x, 1, ..., 1)``.

    Parameters
    ----------
    net : Network
        A chain or a graph network.
    X : array_like, shape (n_samples, n_inputs) or (n_inputs,)
        A graph network also takes ``(n_samples, *input_shape)``.
    pattern : sequence of array_like or dict, optional
        Frozen activation pattern (see :func:`sheaflinalg.assemble`).  By
        default the forward pass's own pattern.
    threads : int, optional
        Threads that share the sample blocks of a big batch (``"sum"``; the
        result is the same bit for bit for any number of threads).
    skip_encoding : {"sum", "edges"}
        ``"sum"`` (default): block forward substitution in the square unit
        lower triangular ``delta_Omega``; the result is the forward pass
        (:func:`sheaflinalg.sheaf.harmonic.harmonic_extension`).
        ``"edges"``: the paper's encoding of skip connections, the
        least-squares solution of the tall system (:func:`least_squares_extension`),
        which differs from the forward pass wherever an ``add`` or ``concat``
        node has parents that disagree.
    solver : {"auto", "direct", "iterative"}
        How ``"edges"`` solves its least-squares problem (:func:`least_squares_extension`);
        checked, and without effect, under ``"sum"``.

    Returns
    -------
    HarmonicExtension

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> from sheaflinalg.network.graph.nodes import Node
    >>> fc = Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [0.0]})
    >>> net = sl.Network.from_nodes((1,), [fc, Node("res", "add", ["fc", "x"])])      # res = 2 x + x
    >>> sl.harmonic_extension(net, [[1.0]]).output.tolist()
    [[3.0]]
    >>> sl.harmonic_extension(net, [[1.0]], skip_encoding="edges").output.round(6).tolist()
    [[1.333333]]
    """
    check_choice(solver, SOLVERS, "solver")
    if check_skip_encoding(skip_encoding) == DEFAULT_SKIP_ENCODING:
        return forward_substitution(net, X, pattern=pattern, threads=threads)
    check_optional_int(threads, "threads")
    return least_squares_extension(net, X, pattern, solver=solver)
