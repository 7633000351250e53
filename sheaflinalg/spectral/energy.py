"""Where an eigenvector's eigenvalue comes from: its energy on every edge of a graph network's sheaf.

For a unit eigenvector ``v`` of ``L[Omega, Omega] = delta_Omega^T delta_Omega``
the eigenvalue is the Rayleigh quotient ``lambda = ||delta_Omega v||^2``, a sum
over the edges: one per node (its defining edge), and ``e_y`` for the free
system of a nonlinear output.  :func:`edge_energy` gives each edge's term
(one substitution-free product with the coboundary per sample); unlike
:meth:`~sheaflinalg.spectral.result.SpectrumResult.block_energy` (the squared
entries of ``v`` on each node, summing to 1) the terms sum to the eigenvalue.
"""

import numpy as np

from .._common.validation import as_samples
from ..network.model import check_network
from ..network.paths import GRAPH, engine
from ..sheaf.matrix_free.coboundary import GraphCoboundary
from .operators.graph_systems import graph_pattern


def edge_energy(net, X, result, which="smallest", index=0):
    """Energy ``||(delta_Omega v)_e||^2`` of eigenvector ``index`` on every edge ``e``, per sample.

    Parameters
    ----------
    net : Network
        The graph network ``result`` was computed for.
    X : array_like, shape (n_samples, ...)
        Its inputs (the same as :func:`~sheaflinalg.spectrum`'s; the forward pass's pattern).
    result : SpectrumResult
        Of ``spectrum(net, X, vectors=True)`` (reduced or free system).
    which : {"smallest", "largest"}
    index : int
        Which of the ``k`` eigenvectors.

    Returns
    -------
    dict
        ``{edge: ndarray (n_samples,)}``: the node names (their defining edges) and ``"e_y"`` for a free
        system's output edge; summed over the edges, the eigenvalue.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 2)), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((1, 4), [conv, sl.Node("r", "relu", ["c"])])
    >>> X = np.array([[1.0, -2.0, 3.0, 0.5]])
    >>> sp = sl.spectrum(net, X, progress=False)
    >>> energy = sl.spectral.edge_energy(net, X, sp)
    >>> list(energy), bool(np.isclose(sum(energy.values())[0], sp.lambda_min[0]))
    (['c', 'r'], True)
    """
    check_network(net, graphs=True)
    if engine(net) != GRAPH or not getattr(result.layout, "is_graph", False):
        raise ValueError("edge_energy needs a graph network and its spectrum (a chain's: use block_energy)")
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    V = result._vectors(which, index)
    if V.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but the spectrum has {V.shape[0]}")
    pattern, jacobians = graph_pattern(net, X, None, result.system == "reduced")
    op = GraphCoboundary(net.graph, pattern, jacobians=jacobians, layout=result.layout)
    edges = op.apply(V)
    return {b.name[2:] if b.name != "e_y" else b.name: np.sum(edges[:, b.slice] ** 2, axis=1)
            for b in result.layout.edge_blocks}
