"""One sample block through the graph, with the checks and the rectifiers fused into the passes that write values.

A forward pass keeps every node's value.  On large feature maps (ResNet-50 at 224x224 keeps 302 MB a
sample) a pass over values that left the caches costs as much as the arithmetic: the check that each
value is finite, and a rectifier reading the batch norm or the sum just written.  A node whose rule has
a checked step (:meth:`~sheaflinalg.network.ops.rule.OpRule.checked_forward`: batch norm, two-parent
addition) writes its value, checks it (and its input, for a batch norm: the convolution before it is
then not checked on its own) and runs a rectifier that reads it alone, in one compiled pass.  The values
are the same bit for bit as node by node (``tests/network/test_fusion.py``).  A value that is not finite
stops the pass; the caller runs it again node by node for the message that names the first such node.
"""

from collections import namedtuple

import numpy as np

from ...kernels.elementwise import all_finite, checked_add
from ..ops.tangent import Linearisation
from .nodes import INPUT

#: One step of a block's pass: node ``k``; ``then`` the index of the rectifier run with it or None;
#: ``checked`` the node's checked step or None (its own step then); ``check`` whether its value is checked
#: after its own step (False: a checked step that reads it checks it).
Unit = namedtuple("Unit", "k then checked check")

_NO_VALUES, _NO_MASK = np.empty((0, 0)), np.empty((0, 0), dtype=bool)


def fusion_plan(graph, fuse=True):
    """The :class:`Unit` list of a block's pass through ``graph``, in the graph's order (a rectifier run with
    the node it reads is left out of its place); ``fuse`` False: every node on its own, every value checked.

    Examples
    --------
    >>> from sheaflinalg.network.graph import Graph, Node
    >>> g = Graph((2,), [Node("fc", "linear", ["x"], params={"weight": np.ones((2, 2)), "bias": np.zeros(2)}),
    ...                  Node("bn", "batchnorm", ["fc"], params={"scale": np.ones(2), "shift": np.zeros(2)}),
    ...                  Node("r", "relu", ["bn"])])
    >>> [(u.k, u.then, u.checked is not None, u.check) for u in fusion_plan(g)]
    [(0, None, False, False), (1, 2, True, True)]
    """
    nodes = graph.nodes
    if not fuse:
        return [Unit(k, None, None, True) for k in range(len(nodes))]
    units, absorbed, checked_inputs = [], set(), set()
    for k, node in enumerate(nodes):
        if k in absorbed:
            continue
        readers = [j for j in range(k + 1, len(nodes)) if tuple(nodes[j].inputs) == (node.name,)]
        then = next((j for j in readers if node.rule.checked_forward(node, graph, nodes[j]) is not None), None)
        made = node.rule.checked_forward(node, graph, None if then is None else nodes[then])
        if made is None:
            units.append(Unit(k, None, None, True))
            continue
        step, checks_inputs = made
        if checks_inputs:
            checked_inputs.update(node.inputs)
        if then is not None:
            absorbed.add(then)
        units.append(Unit(k, then, step, True))
    return [u._replace(check=u.checked is not None or nodes[u.k].name not in checked_inputs) for u in units]


class Overflow(Exception):
    """A value that is not finite: ``where`` is ``(node index, sample in the batch)``."""

    def __init__(self, where):
        super().__init__(where)
        self.where = where


class BlockPass:
    """The graph on the samples ``lo <= s < hi`` of a batch, written into their rows of every node's value.

    Parameters
    ----------
    graph : Graph
    steps : list
        One step per node (:func:`~sheaflinalg.network.graph.forward.node_steps`).
    values, used : dict
        Every node's value and pattern arrays of the whole batch (``values`` holds the input too).
    frozen : bool
        Whether ``used`` is a frozen pattern (read) or written.
    consistent : ndarray of bool
        The batch's self-consistency, cleared where a frozen pattern disagrees.
    lo, hi : int
        The block's rows.
    residuals : dict or None
        Edge residuals added to the values as they are made.
    tangents : dict or None
        ``{name: {lo: linearisation}}``, filled by the steps that make one.
    """

    def __init__(self, graph, steps, values, used, frozen, consistent, lo, hi, residuals=None, tangents=None):
        self.graph, self.steps, self.used, self.frozen = graph, steps, used, frozen
        self.consistent, self.lo, self.hi, self.residuals, self.tangents = consistent, lo, hi, residuals, tangents
        self.local = {name: values[name][lo:hi] for name in [INPUT] + [node.name for node in graph.nodes]}

    def run(self, plan):
        """Every unit of ``plan`` (:func:`fusion_plan`) in order.

        Raises
        ------
        Overflow
            At the first value that is not finite (``where``: the node and sample; with a checked step, the
            node and the block's first sample).
        """
        with np.errstate(over="ignore", invalid="ignore"):
            for unit in plan:
                if unit.checked is None:
                    self.node(unit.k, unit.check)
                else:
                    self.fused(unit)

    def node(self, k, check):
        """Node ``k`` by its own step; its value checked if ``check``."""
        node = self.graph.nodes[k]
        name, lo, hi = node.name, self.lo, self.hi
        out = self.local[name]
        agrees = self.steps[k]([self.local[p] for p in node.inputs], out,
                               self.used[name][lo:hi] if name in self.used else None, self.frozen)
        finite = True
        if self.residuals is not None:      # added and checked in one compiled pass
            finite = checked_add(out, self.residuals[name][lo:hi], out, 0.0, _NO_MASK, _NO_VALUES, False)
        elif check:
            finite = all_finite(out) if out.ndim == 2 else bool(np.all(np.isfinite(out)))
        if check and not finite:
            raise Overflow((k, lo + int(np.argwhere(~np.isfinite(out))[0, 0])))
        if isinstance(agrees, Linearisation):
            self.tangents[name][lo] = agrees
        elif agrees is not None:
            self.consistent[lo:hi] &= agrees

    def fused(self, unit):
        """Node ``unit.k`` by its checked step, with the rectifier ``unit.then`` if any."""
        node = self.graph.nodes[unit.k]
        then = None if unit.then is None else self.graph.nodes[unit.then].name
        finite = unit.checked([self.local[p] for p in node.inputs], self.local[node.name],
                              _NO_VALUES if then is None else self.local[then],
                              _NO_MASK if then is None else self.used[then][self.lo:self.hi])
        if not finite:
            raise Overflow((unit.k, self.lo))
