"""A bound on ``lambda_max(delta_P^T delta_P)`` of a graph network valid for every activation pattern.

``delta_P`` on the free nodes (and ``yhat``) has the identity on its block
diagonal and ``-F_(u->v)`` in block row ``v``, block column ``u`` for every
non-input parent ``u`` of ``v``; the output edge adds ``yhat - J z_out``.  For
any block matrix ``||A||_2 <= ||M||_2`` where ``M[v, u] = ||A_vu||_2`` (apply
Cauchy-Schwarz block row by block row), so with ``n_vu`` an upper bound on
``||F_(u->v)||_2`` over EVERY pattern,

``lambda_max <= ||I + (n_vu)||_2^2 + max gamma + lambda``

(a small dense matrix of one row and column per node).  The per-map bounds:

- linear: ``||W||_2`` (:func:`spectral_norm`);
- conv: the zero-padded, strided convolution is a submatrix of the circular
  one on the padded grid, whose norm is the largest ``||W_hat(f)||_2`` over the
  grid's DFT frequencies (per group); for very large layers, where those
  small SVDs cost too much, ``sqrt(max row sum * max column sum)`` of ``|W|``;
- avgpool, adaptive_avgpool: ``sqrt(max row sum * max column sum)`` (entries >= 0);
- maxpool: a selection has one 1 per row, so ``||S||_2^2`` is the largest
  number of windows choosing one parent entry, at most the number of windows
  containing it;
- relu, leaky_relu: ``max(1, |slope|)`` (the mask's entries are 1 or the slope);
- batchnorm: ``max |scale|``; add, concat, reshape: 1;
- the output Jacobian: 1 (identity, sigmoid, tanh, softmax).

Hard pins take principal submatrices (only lowering ``lambda_max``); the reduced
system drops the output edge and ``yhat`` (a submatrix again), so one bound
serves both.
"""

import numpy as np

from ..kernels.convolution import conv_forward, conv_transpose
from ..kernels.pooling import average_pool, average_pool_transpose
from ..network.graph.forward import conv_geometry_of, pool_windows
from ..network.graph.nodes import INPUT, window_geometry

#: Largest work (frequencies x C_out x C_in x min(C_out, C_in) per group) of the Fourier conv bound.
FOURIER_WORK = 2e9


def spectral_norm(W):
    """``||W||_2``: exact (LAPACK SVD) up to 2000 columns/rows, else ARPACK ``svds`` + 1 %."""
    if min(W.shape) <= 2000:
        return float(np.linalg.norm(W, 2))
    from scipy.sparse.linalg import svds

    return 1.01 * float(svds(W, k=1, return_singular_vectors=False)[0])


def _fourier_conv_norm(W, groups, spatial, padding, dilation):
    """Largest ``||W_hat(f)||_2`` over the DFT frequencies of the padded grid, per group; None if too costly."""
    kernel = W.shape[2:]
    grid = tuple(max(n + 2 * p, (k - 1) * d + 1) for n, k, p, d in zip(spatial, kernel, padding, dilation))
    per, cin = W.shape[0] // groups, W.shape[1]
    if np.prod(grid) * per * cin * min(per, cin) * groups > FOURIER_WORK:
        return None
    taps = np.zeros((groups, per, cin) + grid)
    spread = tuple(slice(0, (k - 1) * d + 1, d) for k, d in zip(kernel, dilation))
    taps[(slice(None),) * 3 + spread] = W.reshape((groups, per, cin) + kernel)
    axes = tuple(range(3, 3 + len(grid)))
    # real taps: the frequencies f and -f give conjugate matrices (same norm), so half the grid suffices
    hat = np.moveaxis(np.fft.rfftn(taps, axes=axes), (1, 2), (-2, -1))
    return float(np.max(np.linalg.norm(hat, ord=2, axis=(-2, -1))))


def _conv_norm(node, graph):
    W = node.params["weight"]
    spatial, _, _, padding, dilation = window_geometry(node, graph.shapes[node.inputs[0]])
    fourier = _fourier_conv_norm(W, node.attrs["groups"], spatial, padding, dilation)
    if fourier is not None:
        return fourier
    geom, ones = conv_geometry_of(node, graph), np.ones((1, graph.sizes[node.inputs[0]]))
    rows = conv_forward(ones, np.abs(W), np.zeros(W.shape[0]), geom)
    cols = conv_transpose(np.ones((1, graph.sizes[node.name])), np.abs(W), geom)
    return float(np.sqrt(rows.max() * cols.max()))


def _avgpool_norm(node, graph):
    windows = pool_windows(node, graph)
    rows = average_pool(np.ones((1, graph.sizes[node.inputs[0]])), *windows)
    cols = average_pool_transpose(np.ones((1, graph.sizes[node.name])), *windows)
    return float(np.sqrt(rows.max() * cols.max()))


def _maxpool_norm(node, graph):
    _, n_in, index, _ = pool_windows(node, graph)
    return float(np.sqrt(np.bincount(index[index >= 0], minlength=n_in).max()))


def _mask_norm(node, graph):
    return max(1.0, abs(float(node.attrs["negative_slope"]))) if node.op == "leaky_relu" else 1.0


_NORMS = {"linear": lambda node, graph: spectral_norm(node.params["weight"]), "conv": _conv_norm,
          "avgpool": _avgpool_norm, "adaptive_avgpool": _avgpool_norm, "maxpool": _maxpool_norm,
          "relu": _mask_norm, "leaky_relu": _mask_norm,
          "batchnorm": lambda node, graph: float(np.max(np.abs(node.params["scale"]), initial=0.0))}


def map_norm_bound(node, graph):
    """An upper bound on ``||F_(u->v)||_2`` of node ``v`` = ``node`` from each of its parents, for every pattern."""
    norm = _NORMS.get(node.op)
    return 1.0 if norm is None else norm(node, graph)


def block_norms(graph):
    """``I + (n_vu)``: one row and column per node in topological order, then ``yhat`` (see the module)."""
    names = [node.name for node in graph.nodes]
    at = {name: i for i, name in enumerate(names)}
    M = np.eye(len(names) + 1)
    for node in graph.nodes:
        n = map_norm_bound(node, graph)
        for parent in node.inputs:
            if parent != INPUT:
                M[at[node.name], at[parent]] += n
    M[len(names), at[graph.output_node]] += 1.0
    return M


def graph_lambda_max_bound(graph, gamma_max=0.0, reluctance=0.0):
    """``||I + (n_vu)||_2^2 + gamma_max + reluctance``: a bound on ``lambda_max`` for every pattern.

    Parameters
    ----------
    graph : Graph
    gamma_max : float
        Largest soft-pin strength (added on the diagonal).
    reluctance : float
        Reluctance strength (added on the diagonal).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[3.0, 4.0]]), "bias": np.zeros(1)})
    >>> net = sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])])
    >>> block_norms(net.graph)             # rows and columns: fc, r, yhat; ||F_(fc->r)|| <= 1
    array([[1., 0., 0.],
           [1., 1., 0.],
           [0., 1., 1.]])
    >>> round(graph_lambda_max_bound(net.graph), 6)
    3.24698
    """
    return float(np.linalg.norm(block_norms(graph), 2)) ** 2 + float(gamma_max) + float(reluctance)
