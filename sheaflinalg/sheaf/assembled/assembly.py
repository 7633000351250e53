"""Assembly of the neural sheaf (:func:`assemble`): the checks, the memory estimate, and the system
(:class:`~sheaflinalg.sheaf.assembled.system.SheafSystem`, or :class:`~sheaflinalg.sheaf.assembled.augmented.AugmentedSheafSystem`
with pins, soft pins, reluctance or freed inputs).
"""

import numpy as np

from ..._common.memory import check_memory, format_bytes
from ..._common.validation import as_float64, as_samples, check_bool
from ...network.model import check_network
from .augmented import AugmentedSheafSystem
from ..layout import Layout
from ..patterns import normalise_graph_pattern, normalise_pattern
from ..pins.specs import resolve_pins
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding
from .system import SheafSystem
from ...network.paths import GRAPH, engine


def check_pattern(net, pattern, n_samples):
    """A validated frozen pattern: a list of masks (chains) or ``{node: array}`` (graph networks)."""
    if engine(net) == GRAPH:
        return normalise_graph_pattern(net.graph, pattern, n_samples)
    return normalise_pattern(net, pattern, n_samples)


def forward_pattern(net, X):
    """The forward pass's own pattern of the (validated, flat) inputs ``X``."""
    if engine(net) == GRAPH:
        return net.evaluate(X).pattern
    return [z >= 0 for z in net.forward_states(X)[0][:-1]]


#: What works without assembling, named when an assembly is refused.
MATRIX_FREE = ("harmonic_extension, heat and spectrum(method='arpack') without pins work matrix-free and "
               "need none of it")


def system_bytes(net, n_samples):
    """Estimate of the memory of an assembled batch: ``delta`` (with the temporaries of its
    construction) and ``L[Omega, Omega]``, whose blocks ``W_l^T W_l`` are dense, in CSR (16 bytes an entry).

    For a graph network the sum over the edges of :func:`edge_nnz` (an upper bound on the nonzeros).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> system_bytes(sl.Network.random([2, 30, 1], seed=0), 1000) < 2**25
    True
    """
    if engine(net) == GRAPH:
        return sum(edge_bytes(net.graph, n_samples).values())
    dims = net.dims
    n_free = 2 * sum(dims[1:-1]) + 2 * dims[-1]
    nnz_delta = net.n_parameters + 2 * n_free
    nnz_laplacian = sum(n * n for n in dims[:-1]) + 2 * net.n_parameters + 3 * n_free
    return 16 * n_samples * (3 * nnz_delta + nnz_laplacian)


def edge_nnz(graph):
    """``{edge: (nnz of delta, bound on the nnz of L)}`` of one sample: the defining edge of every node
    (named by its node) and the output edge ``"e_y"``, an upper bound on what assembly stores.

    Edge ``v``'s block row is ``[I, -F_u..., -diag(b)]``: its entries are the identity's ``n`` and the maps'
    (bias included: :meth:`~sheaflinalg.network.ops.OpRule.nnz`), and its share of ``L`` the pairs of its
    blocks: the maps' Gram block (the rule's bound, every pair of parents), each map against the identity
    and the bias diagonal, the diagonals against each other.  The output edge ``[I, -J]`` (``J`` dense for
    softmax, else diagonal) has ``n + nnz(J)`` entries and at most ``n + 3 nnz(J)`` pairs.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((3, 2)), "bias": np.zeros(3)})
    >>> edge_nnz(sl.Network.from_nodes((2,), [fc]).graph)
    {'fc': (12, 52), 'e_y': (6, 12)}
    """
    out = {}
    for node in graph.nodes:
        n = graph.sizes[node.name]
        maps, gram = node.rule.nnz(node, graph)
        diagonals = 2 if node.rule.has_bias else 1            # the identity, the ones block's diag(b)
        out[node.name] = (maps + n, gram + 2 * diagonals * maps + diagonals * diagonals * n)
    n_out = graph.n_outputs
    jacobian = n_out * n_out if graph.output == "softmax" else n_out        # else diagonal
    out["e_y"] = (n_out + jacobian, n_out + 3 * jacobian)
    return out


def edge_bytes(graph, n_samples):
    """``{edge: bytes}`` of an assembled batch, edge by edge (:func:`edge_nnz`; see :func:`system_bytes`)."""
    return {edge: 16 * n_samples * (3 * d + lap) for edge, (d, lap) in edge_nnz(graph).items()}


def check_system_memory(net, n_samples):
    """Refuse an assembly of ``n_samples`` whose estimate exceeds the memory available; on a graph network the
    message names the nodes of the largest shares (dense blocks: normalisation groups, softmax slices,
    attention's products) with their estimates, and the matrix-free paths.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> check_system_memory(sl.Network.random([2, 3, 1], seed=0), 10)    # small: nothing to refuse
    """
    what = f"the sparse sheaf system of {n_samples} samples"
    way_out = "assemble fewer samples at a time (samples are independent blocks)"
    if engine(net) == GRAPH:
        graph, per = net.graph, edge_bytes(net.graph, n_samples)
        largest = sorted(per, key=per.get, reverse=True)[:3]
        what += " (largest: " + ", ".join(
            f"node {name!r} ({graph.node(name).op}) {format_bytes(per[name])}" if name != "e_y"
            else f"the output edge {format_bytes(per[name])}" for name in largest) + ")"
        way_out = f"{MATRIX_FREE}; or {way_out}"
    check_memory(system_bytes(net, n_samples), what, way_out)


def assemble(net, x, pattern=None, reduced=False, pins=None, soft_pins=None, reluctance=None,
             free_inputs=None, linearise_at=None, skip_encoding=DEFAULT_SKIP_ENCODING):
    """Assemble the neural sheaf of ``net`` at input(s) ``x``.

    Parameters
    ----------
    net : Network
        A chain or a graph network: every node has one defining edge
        ``x_v - sum_u F_(u->v) x_u - diag(b_v) 1_v`` (rows from
        :mod:`sheaflinalg.network.ops`), laid out by
        :meth:`Layout.from_graph`.
    x : array_like, shape (n_0,) or (n_samples, n_0)
        One input or a batch (assembled block-diagonally, sample-major); a
        graph network also takes ``input_shape`` or ``(n_samples, *input_shape)``.
    pattern : sequence of array_like or dict, optional
        One boolean mask per hidden layer, shape ``(n_l,)`` or ``(n_samples, n_l)``,
        freezing the activation pattern (``True`` = active); for a graph network a
        dict ``{node: array}`` over its pattern nodes (masks; max-pool argmax
        positions in the parent's stalk).  Default: each sample's own
        forward-pass pattern (``z >= 0`` active, first maximum of a window).
    reduced : bool
        Assemble the reduced sheaf without ``v_y`` and ``e_y``.
    pins : dict, optional
        Hard pins ``{selector: values}`` (format: :mod:`sheaflinalg.sheaf.pins.specs`):
        the selected coordinates move from ``Omega`` to ``U``.
    soft_pins : SoftPins or (targets, gamma), optional
        Soft-pin (penalty) edges of strength ``gamma`` (paper eq. pinning-maps).
    reluctance : float or Reluctance, optional
        Reluctance edges ``sqrt(lam) I`` from every free coordinate to an
        anchor (appendix C.2).
    free_inputs : sequence of int, optional
        Input coordinates moved from ``U`` to ``Omega`` (imputation).
    linearise_at : array_like, shape (n_samples, n_out), optional
        Linearise a nonlinear output at this ``z(k+1)`` instead of the
        pattern's harmonic extension (augmented systems only).
    skip_encoding : {"sum", "edges"}
        ``"sum"``: one defining hyperedge per node, ``delta_Omega`` square and
        unit lower triangular.  ``"edges"``: the paper's encoding, one
        two-endpoint edge per parent of an ``add`` or ``concat`` node
        (:mod:`sheaflinalg.sheaf.skip_edges.encoding`), ``delta_Omega`` tall; pins, soft
        pins, reluctance and free inputs act on the same coordinates under both.

    Returns
    -------
    SheafSystem or AugmentedSheafSystem
        ``delta``, ``delta_free``, ``delta_boundary``, ``u``, ``laplacian``,
        ``laplacian_free``, ``laplacian_boundary``, ``laplacian_reduced`` and
        ``layout`` (matrices are CSR float64, built lazily on first access).
        With any of ``pins``, ``soft_pins``, ``reluctance``, ``free_inputs``
        an :class:`AugmentedSheafSystem` (``delta_free`` tall with the extra edges).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> s = sl.assemble(net, [0.5, -1.0])
    >>> s.delta_free.shape
    (8, 8)
    >>> bool((s.delta_free.diagonal() == 1.0).all())
    True
    """
    check_network(net, graphs=True)
    X, _ = as_samples(x, net.n_inputs, name="x", input_shape=net.input_shape)
    reduced = check_bool(reduced, "reduced")
    M, n_out = X.shape[0], net.n_outputs
    augmented = not (pins is None and soft_pins is None and reluctance is None and free_inputs is None
                     and linearise_at is None)
    check_skip_encoding(skip_encoding)
    if augmented:
        r = resolve_pins(net, X, Layout.for_network(net, reduced), pins, soft_pins, reluctance, free_inputs)
    if linearise_at is not None:
        linearise_at = as_float64(linearise_at, "linearise_at")
        if linearise_at.shape not in ((M, n_out), (n_out,)):
            raise ValueError(f"linearise_at must have shape ({M}, {n_out}) or ({n_out},), got {linearise_at.shape}")
        linearise_at = np.ascontiguousarray(np.broadcast_to(linearise_at, (M, n_out)))
    pattern = None if pattern is None else check_pattern(net, pattern, M)
    check_system_memory(net, M)
    if pattern is None:
        pattern = forward_pattern(net, X)
    if not augmented:
        return SheafSystem(net, X, pattern, reduced=reduced, skip_encoding=skip_encoding)
    return AugmentedSheafSystem(net, X, pattern, reduced, r.hard, r.soft, r.lam, r.anchor, r.free_inputs,
                                linearise_at, skip_encoding=skip_encoding)
