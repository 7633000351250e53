"""The harmonic extension under ``skip_encoding="edges"``: a least-squares solution, not the forward pass.

With one edge per parent of an ``add`` or ``concat`` node
(:mod:`sheaflinalg.sheaf.skip_edges.encoding`) ``delta_Omega`` is tall, and the
harmonic extension minimises the discord ``||delta_Omega w + delta_U u + c||``
(``c`` the linearised output edge's offset): the normal equations
``L[Omega,Omega] w = -delta_Omega^T (delta_U u + c)``, solved with one sparse
Cholesky factorisation (:mod:`sheaflinalg.sheaf.assembled.factor`).  ``L[Omega,Omega]`` is
positive definite because ``delta_Omega`` has full column rank
(:mod:`sheaflinalg.sheaf.verification.rank`).  At an ``add`` node the two edges pull
``x_v`` towards each parent: the result is a compromise, not their sum.

The public :func:`harmonic_extension` lives here, above the assembly that the
least-squares extension needs; with ``skip_encoding="sum"`` it is
:func:`sheaflinalg.sheaf.harmonic.harmonic_extension` (forward substitution).
"""

import numpy as np

from ..._common.validation import check_optional_int
from ..assembled.assembly import assemble
from ..assembled.factor import check_backend, cholesky
from ..harmonic import HarmonicExtension
from ..harmonic import harmonic_extension as forward_substitution
from .encoding import check_skip_encoding


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


def least_squares_extension(net, X, pattern=None, backend="auto"):
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
        Sparse Cholesky backend.

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
    system = assemble(net, X, pattern, skip_encoding="edges")
    free = solve_normal_equations(system, backend)
    lay = system.layout
    forward = system.harmonic
    return HarmonicExtension(free=free, output=free[:, lay.free(lay.output_block)], pattern=forward.pattern,
                             self_consistent=forward.self_consistent, layout=lay)


def harmonic_extension(net, X, pattern=None, threads=None, skip_encoding="sum"):
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
    if check_skip_encoding(skip_encoding) == "sum":
        return forward_substitution(net, X, pattern=pattern, threads=threads)
    check_optional_int(threads, "threads")
    return least_squares_extension(net, X, pattern)
