"""Exact harmonic extensions by block forward substitution in ``delta_Omega``.

Because ``delta_Omega`` is block unit lower triangular (identity blocks on the
diagonal, ``-R``, ``-W``, ``-J`` below), ``delta_Omega omega = -delta_U u`` is
solved one block row at a time: each row is a matrix product (weight edge) or
a mask (activation edge).  For the forward-pass pattern this *is* the forward
pass (the paper's Proposition "Forward pass as harmonic extension").
"""

import numpy as np

from .._common.blocks import block_bounds, map_blocks
from .._common.memory import FLOAT, check_batch
from .._common.threads import blas_limit, resolve_threads
from .._common.validation import as_samples, check_optional_int
from ..network import activations
from ..network.errors import GraphNetworkError
from ..network.graph.forward import evaluate
from ..network.model import NetworkOverflowError, check_network
from .layout import Layout
from .patterns import normalise_graph_pattern, normalise_pattern
from ..network.paths import GRAPH, engine


class HarmonicExtension:
    """Result of :func:`harmonic_extension`.

    Attributes
    ----------
    free : ndarray, shape (n_samples, n_free)
        Free cochain in the layout's order ``z1, a1, ..., z(k+1), yhat`` (a graph
        network: its nodes in topological order, then ``yhat``; laid out from
        ``values`` when first read, so that the extension itself copies nothing).
    output : ndarray, shape (n_samples, n_out)
        ``yhat`` (equal to ``phi(z(k+1))``).
    pattern : list of ndarray or dict
        The activation pattern used, (n_samples, n_l) per hidden layer (a graph
        network: ``{node: array}``, masks and max-pool argmax positions).
    self_consistent : ndarray of bool, shape (n_samples,)
        Whether the pattern agrees with the signs of the computed
        pre-activations (a pre-activation exactly 0 agrees with either label).
    layout : Layout
    values : dict or None
        A graph network's node values ``{node: (n_samples, size)}`` as the
        forward substitution computed them (None for a chain).
    """

    def __init__(self, free, output, pattern, self_consistent, layout, values=None):
        if free is None and values is None:
            raise ValueError("HarmonicExtension needs the free cochain or the node values")
        self._free, self.output, self.pattern = free, output, pattern
        self.self_consistent, self.layout, self.values = self_consistent, layout, values

    @property
    def free(self):
        if self._free is None:
            parts = [self.values[block.name] for block in self.layout.free_blocks if block.name != "yhat"]
            self._free = np.concatenate(parts + [self.output], axis=1)
        return self._free

    def __repr__(self):
        return (f"HarmonicExtension({self.output.shape[0]} samples, {self.layout.n_free} free coordinates, "
                f"output {self.output.shape[1]})")

    def node(self, name):
        """The values of free block ``name`` (a node of a graph network, ``"z1"``, ``"yhat"``...), (n_samples, size)."""
        if self.values is not None and name in self.values:
            return self.values[name]
        return self.free[:, self.layout.free(name)]

    @property
    def preactivations(self):
        """``[z1, ..., z(k+1)]``, each (n_samples, n_l) (chains; a graph network reads :meth:`node`)."""
        self._chain_only("preactivations")
        return [self.free[:, self.layout.free(self.layout.z(l))] for l in range(1, self.layout.n_hidden + 2)]

    @property
    def hidden_activations(self):
        """``[a1, ..., ak]``, each (n_samples, n_l) (chains; a graph network reads :meth:`node`)."""
        self._chain_only("hidden_activations")
        return [self.free[:, self.layout.free(self.layout.a(l))] for l in range(1, self.layout.n_hidden + 1)]

    def _chain_only(self, what):
        if self.layout.is_graph:
            raise GraphNetworkError(f"HarmonicExtension.{what} is defined for chains of Linear/ReLU layers; read a "
                                    "graph network's nodes with h.node(name)")


def graph_extension(graph, X, pattern=None, threads=None):
    """The harmonic extension of a graph network: its forward substitution (``evaluate``) laid out in free order.

    ``X`` (flat, ``(n_samples, n_inputs)``) and ``pattern`` (normalised, or None) are checked by the caller;
    ``threads`` share the sample blocks of ``evaluate`` (the result is the same for any number).
    """
    lay = Layout.from_graph(graph)
    state = evaluate(graph, X, pattern, threads=threads)
    values = {node.name: state.values[node.name] for node in graph.nodes}
    output = activations.apply(graph.output, state.values[graph.output_node])
    return HarmonicExtension(free=None, output=output, pattern=state.pattern,
                             self_consistent=state.self_consistent, layout=lay, values=values)



# A big batch is cut into sample blocks by its size and the network alone
# (never by the thread count): at least BLOCK_WORK multiply-adds and
# MIN_BLOCK_SAMPLES samples each (a block of fewer samples streams a wide
# weight matrix for too little work), at most MAX_BLOCKS.
BLOCK_WORK = 1 << 19
MIN_BLOCK_SAMPLES = 128
MAX_BLOCKS = 16


def sample_blocks(dims, M):
    """Row bounds of the sample blocks of a batch of ``M`` samples (``[0, M]``: one block).

    Examples
    --------
    >>> sample_blocks([2, 30, 1], 300)
    [0, 300]
    >>> sample_blocks([2, 1000, 1000, 1], 500)
    [0, 167, 334, 500]
    """
    work = sum(int(a) * int(b) for a, b in zip(dims[:-1], dims[1:]))
    return block_bounds(M, work, BLOCK_WORK, MAX_BLOCKS, MIN_BLOCK_SAMPLES)


def harmonic_extension(net, X, pattern=None, threads=None):
    """Harmonic extension of the boundary data ``(x, 1, ..., 1)`` by forward substitution.

    Parameters
    ----------
    net : Network
        A chain or a graph network (for a graph network the extension is the
        block forward substitution in topological order, :meth:`Network.evaluate`).
    X : array_like, shape (n_samples, n_0) or (n_0,)
        A graph network also takes ``(n_samples, *input_shape)``.
    pattern : sequence of array_like or dict, optional
        Frozen activation pattern (see :func:`sheaflinalg.assemble`).  By
        default the self-consistent pattern is found layer by layer, and the
        result is the forward pass.
    threads : int, optional
        Threads that share the sample blocks of a big batch (any positive
        integer; default :func:`sheaflinalg.get_num_threads`).  A batch is cut
        into blocks by its size and the network alone (:func:`sample_blocks`),
        each computed with one BLAS thread, so the result is the same bit for
        bit for any number of threads; a small batch is one block.

    Returns
    -------
    HarmonicExtension

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=0)
    >>> X = np.random.default_rng(1).uniform(-2, 2, size=(5, 2))
    >>> h = sl.harmonic_extension(net, X)
    >>> bool(np.allclose(h.output, net.forward(X), rtol=1e-12, atol=0))
    True
    """
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    threads = resolve_threads(check_optional_int(threads, "threads"))
    M = X.shape[0]
    if engine(net) == GRAPH:
        graph = net.graph
        check_batch(M, FLOAT * (2 * sum(graph.sizes.values()) + graph.n_outputs), "the harmonic extension")
        if pattern is not None:
            pattern = normalise_graph_pattern(graph, pattern, M)
        return graph_extension(graph, X, pattern, threads)
    lay = Layout.for_network(net)
    # free, the pattern and the forward pass's temporaries of a block
    check_batch(M, FLOAT * (lay.n_free + 2 * sum(net.dims[1:])), "the harmonic extension")
    if pattern is not None:
        pattern = normalise_pattern(net, pattern, M)
    free = np.empty((M, lay.n_free))
    consistent = np.ones(M, dtype=bool)
    k = net.n_hidden
    used = list(pattern) if pattern is not None else [np.empty((M, n), dtype=bool) for n in net.dims[1:k + 1]]
    bounds = sample_blocks(net.dims, M)
    blocks = list(zip(bounds[:-1], bounds[1:]))

    def block(lo_hi):
        return _extend_rows(net, lay, X, pattern, free, used, consistent, *lo_hi)

    if len(blocks) == 1:
        failed = [block(blocks[0])]
    else:
        with blas_limit(1):
            failed = map_blocks(block, blocks, threads)
    failed = [l for l in failed if l]
    if failed:
        l = min(failed)
        raise NetworkOverflowError(f"the harmonic extension overflows at layer {l} (z{l} = W{l} a{l - 1} + "
                                   f"b{l} is not finite): rescale the weights or the inputs")
    return HarmonicExtension(free=free, output=free[:, lay.free("yhat")], pattern=used,
                             self_consistent=consistent, layout=lay)


def _extend_rows(net, lay, X, pattern, free, used, consistent, lo, hi):
    """The forward substitution of the samples ``lo <= s < hi`` into ``free``, ``used`` and
    ``consistent``; returns the first layer whose pre-activation is not finite (0: none)."""
    a = X[lo:hi]
    k = net.n_hidden
    for l in range(1, k + 2):
        W, b = net.weights[l - 1], net.biases[l - 1]
        z = free[lo:hi, lay.free(lay.z(l))]
        with np.errstate(over="ignore", invalid="ignore"):
            np.matmul(a, W.T, out=z)  # weight edge: z_l = W_l a_{l-1} + b_l
            z += b
        if not np.all(np.isfinite(z)):
            return l
        if l == k + 1:
            break
        mask = used[l - 1][lo:hi]
        if pattern is None:
            np.greater_equal(z, 0, out=mask)
        else:
            consistent[lo:hi] &= np.all((mask == (z >= 0)) | (z == 0), axis=1)
        a = free[lo:hi, lay.free(lay.a(l))]
        np.multiply(z, mask, out=a)  # activation edge: a_l = R_l z_l
    out = free[lo:hi, lay.free("yhat")]
    out[...] = activations.apply(net.output, z)
    return 0
