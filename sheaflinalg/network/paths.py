"""The one chain/graph switch: which engine runs a network, and the one refusal of chain-only features.

Every network holds a graph; a graph that is a chain of linear and relu nodes on a
flat input also has a chain view (:attr:`~sheaflinalg.Network.chain`), on which the
fused chain kernels run.  :func:`engine` is the one place that choice is read: every
branch of the package between a chain path and a graph path asks it, and results
record its answer (their ``path``).  Features that have only a chain path (the exact
flow, IMEX, the convergence study) refuse a graph network through :func:`require_chain`,
with one message naming the feature and what to use instead.
"""

from .errors import GraphNetworkError

#: The two paths :func:`engine` chooses between.
CHAIN, GRAPH = "chain", "graph"
#: What graph networks enter (the default way out of :func:`require_chain`).
GRAPH_ENTRIES = ("graph networks enter sl.assemble, sl.harmonic_extension, sl.verify, sl.complete, "
                 "sl.heat (method='euler'), sl.train, sl.sgd, sl.spectrum, sl.discord, Network.forward and "
                 "Network.save")


def engine(net):
    """The path that runs ``net``: ``"chain"`` (the fused chain kernels) or ``"graph"``.

    A network is a chain when it has a chain view (:attr:`~sheaflinalg.Network.chain`):
    a chain of linear and relu nodes on a flat input, however it was built.

    Examples
    --------
    >>> import numpy as np
    >>> from sheaflinalg.network.model import Network
    >>> from sheaflinalg.network.graph import Node
    >>> engine(Network.random([2, 3, 1]))
    'chain'
    >>> lin = Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> engine(Network.from_nodes((2,), [lin]))
    'chain'
    >>> leaky = Node("act", "leaky_relu", ["fc"], {"negative_slope": 0.1})
    >>> engine(Network.from_nodes((2,), [lin, leaky]))
    'graph'
    """
    return CHAIN if net.chain is not None else GRAPH


def require_chain(net, feature, instead=GRAPH_ENTRIES, name="net"):
    """Return ``net`` if :func:`engine` runs it on the chain path, else the one :class:`GraphNetworkError`.

    Parameters
    ----------
    net : Network
    feature : str
        What takes chains only, e.g. ``"heat(method='exact')"``.
    instead : str
        What to use for a graph network.
    name : str
        What the caller calls the network (``net``, ``--network FILE``).

    Examples
    --------
    >>> import numpy as np
    >>> from sheaflinalg.network.model import Network
    >>> from sheaflinalg.network.graph import Node
    >>> lin = Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> leaky = Node("act", "leaky_relu", ["fc"], {"negative_slope": 0.1})
    >>> require_chain(Network.from_nodes((2,), [lin, leaky]), "the feature", "use another")
    Traceback (most recent call last):
    ...
    sheaflinalg.network.errors.GraphNetworkError: the feature takes chains of Linear/ReLU layers only; net is a graph network (2 nodes: leaky_relu, linear): use another
    """
    if engine(net) == CHAIN:
        return net
    graph = net.graph
    ops = ", ".join(sorted({node.op for node in graph.nodes}))
    raise GraphNetworkError(f"{feature} takes chains of Linear/ReLU layers only; {name} is a graph network "
                            f"({len(graph.nodes)} nodes: {ops}): {instead}")
