"""The forward pass of a graph, node by node, with its activation pattern (or under a frozen one).

This is forward substitution in the graph's ``delta_Omega``: every node's value
is ``sum over parents of F_(u->v) x_u + b_v`` with the pattern-dependent maps
(ReLU masks, max-pool selections) fixed by the pattern.  With no pattern
given, each node's pattern is read off its own input (``z >= 0`` active, the
first maximum of each window) and the result is the network's forward pass.

A batch is cut into sample blocks by its size and the graph alone
(:func:`sample_blocks`, never by the thread count); the blocks run the whole
graph one after the other or in a pool of threads, each with one BLAS thread
(the products of a block are chunk-sized: threaded BLAS gains nothing there), and write
their rows of every node's value, so the result is the same bit for bit for any
number of threads.  Each node's step comes from its op's rule,
its geometry (window tables, convolution geometry) prepared once per call
(:func:`node_steps`).
"""

from dataclasses import dataclass

import numpy as np

from ..._common.blocks import block_bounds, map_blocks
from ..._common.spare import spare_empty
from ..._common.threads import blas_limit, resolve_threads
from ..errors import NetworkOverflowError
from ..ops.tangent import Stacked, Tangent
from .fusion import BlockPass, Overflow, fusion_plan
from .nodes import INPUT


@dataclass
class GraphState:
    """Every node's value for a batch, and the pattern that produced them.

    Attributes
    ----------
    values : dict
        ``{name: ndarray (n_samples, stalk size)}``, the input ``"x"`` included (flattened, C order).
    pattern : dict
        ``{name: ndarray (n_samples, stalk size)}`` for each pattern-dependent node:
        bool masks (relu, leaky_relu: ``True`` = active) and int64 argmax positions in the
        parent's stalk (maxpool).
    self_consistent : ndarray of bool, shape (n_samples,)
        Whether a frozen pattern agrees with the values it produced (a pre-activation exactly 0
        agrees with either label, a tied maximum with any of its maxima).
    tangents : dict or None
        ``{name: Linearisation}`` of every smooth node at its pattern, made with its value (:func:`evaluate`
        with ``tangents``, the pattern read off the input); None otherwise.
    """

    values: dict
    pattern: dict
    self_consistent: np.ndarray
    tangents: dict = None


def pool_windows(node, graph):
    """``(channels, n_in_positions, index, divisor)`` of a pooling node (its rule's windows; divisor None for a max)."""
    return node.rule.windows(node, graph)


def node_steps(graph, tangents=False):
    """One function per node of ``graph``, in order: ``step(inputs, out, pattern, frozen) -> agrees``.

    ``inputs`` are the parents' values for a block of samples, ``out`` the block's rows of the
    node's value (written).  For a pattern-dependent node ``pattern`` is the block's rows of its
    pattern: written (``frozen`` False: read off the input) or read (``frozen`` True: a frozen
    pattern, and ``agrees`` says sample by sample whether it agrees with the input); otherwise
    None, and so is ``agrees``.  Each step is its op's rule's (:meth:`OpRule.forward`); with ``tangents``
    a smooth node's step returns its :class:`~sheaflinalg.network.ops.tangent.Linearisation` at the
    input instead of None when not frozen (:meth:`~sheaflinalg.network.ops.tangent.Tangent.linearised_forward`).
    """
    return [node.rule.linearised_forward(node, graph) if tangents and isinstance(node.rule, Tangent)
            else node.rule.forward(node, graph) for node in graph.nodes]


# A batch is cut into sample blocks by its size and the graph alone (never by the thread
# count): at least BLOCK_WORK multiply-adds each, at most MAX_BLOCKS.  Every block runs the
# whole graph in Python and makes shorter products: on ResNet-20 (batch 16) 8 blocks cost 12%
# more CPU time than one, 4 blocks 7%, 2 blocks 2% (benchmarks/graph_forward.py).
BLOCK_WORK = 1 << 23
MAX_BLOCKS = 4


def node_work(node, graph):
    """Multiply-adds per sample of a node (its rule's estimate, for cutting batches)."""
    return node.rule.work(node, graph)


def sample_blocks(graph, M):
    """Row bounds of the sample blocks of a batch of ``M`` samples through ``graph`` (``[0, M]``: one block).

    Examples
    --------
    >>> from sheaflinalg.network.graph import Graph, Node
    >>> g = Graph((2,), [Node("fc", "linear", ["x"], params={"weight": np.ones((1000, 2)), "bias": np.zeros(1000)})])
    >>> sample_blocks(g, 100), sample_blocks(g, 20000)
    ([0, 100], [0, 5000, 10000, 15000, 20000])
    """
    return block_bounds(M, sum(node_work(node, graph) for node in graph.nodes), BLOCK_WORK, MAX_BLOCKS)


def evaluate(graph, X, pattern=None, threads=None, residuals=None, tangents=False, steps=None, whole=False,
             fuse=True):
    """Every node's value for the batch ``X`` (``(n_samples, n_inputs)``, checked by the caller).

    Parameters
    ----------
    graph : Graph
    X : ndarray, shape (n_samples, prod(input_shape))
    pattern : dict, optional
        Frozen pattern ``{node name: array}`` (checked by the caller); default: the forward pass's own.
    threads : int, optional
        Threads that share the sample blocks (default :func:`sheaflinalg.get_num_threads`); the
        result does not depend on it.
    residuals : dict, optional
        ``{node name: (n_samples, stalk size)}``: edge residuals added to the nodes' values as they are
        computed, ``x_v = f_v(x_parents) + r_v`` (the state whose residuals are ``r``, reached by forward
        substitution through the nonlinear maps; the pattern read off it); default: none.
    tangents : bool, optional
        Also the smooth nodes' linearisations at the pattern read off (:attr:`GraphState.tangents`; without
        a frozen ``pattern``), made with their values: what a backward substitution at this state needs.
    steps : list, optional
        ``node_steps(graph, tangents)`` made before: several passes through one graph make them once.
    whole : bool, optional
        The batch as one sample block whatever its size (:func:`sample_blocks` otherwise): for callers whose
        passes are too short to gain from blocks (the result does not depend on ``threads`` either way).
    fuse : bool, optional
        With no frozen ``pattern`` and no ``residuals``: batch norms and additions write their value, check it
        and run the rectifier that reads it in one pass (:func:`~sheaflinalg.network.graph.fusion.fusion_plan`,
        the default); False: node by node.  The values are the same bit for bit.

    Returns
    -------
    GraphState

    Raises
    ------
    NetworkOverflowError
        A node's value is not finite (the message names the node and the first such sample).
    """
    threads = resolve_threads(threads)
    M = X.shape[0]
    if tangents and pattern is not None:
        raise ValueError("the tangents of a forward pass are those of the pattern it reads off: no frozen pattern")
    steps = node_steps(graph, tangents) if steps is None else steps
    values = {INPUT: X}
    values.update(_node_arrays(graph, M))
    dtypes = {name: graph.node(name).rule.pattern.dtype for name in graph.pattern_nodes}
    if pattern is None:
        used = {name: np.empty((M, graph.pattern_size(name)), dtype=dtype) for name, dtype in dtypes.items()}
    else:
        # One array type for the compiled loops: a read-only or broadcast pattern is copied.
        used = {name: np.require(pattern[name], dtype=dtype, requirements=["C", "W"])
                for name, dtype in dtypes.items()}
        for name, rows in used.items():     # the compiled loops read them unchecked
            if np.shape(rows) != (M, graph.pattern_size(name)):
                raise ValueError(f"the frozen pattern of node {name!r} must have shape {(M, graph.pattern_size(name))}, "
                                 f"got {np.shape(rows)}")
    consistent = np.ones(M, dtype=bool)
    bounds = [0, M] if whole else sample_blocks(graph, M)
    made = {name: {} for name in used} if tangents else None
    plan = fusion_plan(graph, fuse and pattern is None and residuals is None)

    def block(lo_hi):
        return _run_block(graph, steps, values, used, pattern is not None, consistent, *lo_hi, residuals=residuals,
                          tangents=made, plan=plan)

    with blas_limit(1):     # one BLAS thread per block, also for one block: its products are short
        failed = map_blocks(block, list(zip(bounds[:-1], bounds[1:])), threads)
    failed = [f for f in failed if f is not None]
    if failed and any(unit.checked is not None for unit in plan):   # node by node: the first node that overflows
        return evaluate(graph, X, pattern, threads, residuals, tangents, steps, whole, fuse=False)
    if failed:
        k, s = min(failed)
        node = graph.nodes[k]
        raise NetworkOverflowError(f"the forward pass overflows at node {node.name!r} ({node.op}): its value is "
                                   f"not finite for sample {s}; rescale the weights or the inputs")
    return GraphState(values=values, pattern=used, self_consistent=consistent, tangents=_stacked(made, bounds))


def _stacked(made, bounds):
    """``{name: Linearisation}`` of the whole batch from ``{name: {first row: block's}}`` (None: none made)."""
    if made is None:
        return None
    return {name: parts[0] if len(parts) == 1 else Stacked(bounds, [parts[lo] for lo in bounds[:-1]])
            for name, parts in made.items()}


#: Bytes of node values a block of :func:`output_values` holds at most (a few cache-sized blocks instead of every
#: node's value of the whole batch: MNIST-1D's 5000 samples through a small ViT, 14k values each, were 560 MB
#: and 4 s, mostly first touches of fresh pages; in blocks 0.5 s).
OUTPUT_BLOCK_BYTES = 1 << 23


def output_values(graph, X, threads=None):
    """The output node's value for the batch ``X`` (checked by the caller), the forward pass in row blocks
    that keep no other node's value (:data:`OUTPUT_BLOCK_BYTES`): what a prediction needs.

    Raises
    ------
    NetworkOverflowError
        As :func:`evaluate` (the message names the sample in ``X``).

    Examples
    --------
    >>> from sheaflinalg.network.graph import Graph, Node
    >>> g = Graph((2,), [Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})])
    >>> output_values(g, np.arange(6.0).reshape(3, 2)).ravel().tolist()
    [1.0, 5.0, 9.0]
    """
    M = X.shape[0]
    rows = max(1, OUTPUT_BLOCK_BYTES // (8 * sum(graph.sizes[node.name] for node in graph.nodes)))
    out = np.empty((M, graph.sizes[graph.output_node]))
    try:
        for lo in range(0, M, rows):
            out[lo:lo + rows] = evaluate(graph, X[lo:lo + rows], threads=threads).values[graph.output_node]
    except NetworkOverflowError:
        evaluate(graph, X, threads=threads)         # the message names the sample of the whole batch
        raise
    return out


def _node_arrays(graph, M):
    """``{name: (M, stalk size) array}`` for every node, views of one buffer.

    One big allocation is backed by huge pages where the system offers them (numpy asks for
    them): a forward pass keeps every node's value, and first touching that many small pages
    cost ResNet-20 (batch 16, 87 MB of values) 17% of its CPU time.  The buffer of an earlier pass is
    reused once nothing holds it (:func:`~sheaflinalg._common.spare.spare_empty`): even huge pages cost
    their first touch (15% of ResNet-20's time).
    """
    sizes = [graph.sizes[node.name] for node in graph.nodes]
    buffer = spare_empty(M * sum(sizes))
    arrays, start = {}, 0
    for node, size in zip(graph.nodes, sizes):
        arrays[node.name] = buffer[start:start + M * size].reshape(M, size)
        start += M * size
    return arrays


def _run_block(graph, steps, values, used, frozen, consistent, lo, hi, residuals=None, tangents=None, plan=None):
    """The graph on the samples ``lo <= s < hi``, written into their rows of ``values``, ``used`` and
    ``consistent`` (``residuals``: added to every node's value as it is computed; ``tangents``: ``{name:
    {lo: linearisation}}``, filled by the steps that make one; ``plan``: :func:`fusion_plan`, default node by
    node); returns ``(node index, sample)`` of the first value that is not finite, or None."""
    try:
        BlockPass(graph, steps, values, used, frozen, consistent, lo, hi, residuals, tangents).run(
            plan or fusion_plan(graph, False))
    except Overflow as error:
        return error.where
    return None
