"""The one chain/graph switch (:func:`sheaflinalg.network.paths.engine`) pins which path runs a network.

A chain of linear and relu nodes on a flat input takes the chain path (the fused kernels) however it
was built, and gives the chain's numbers bit for bit; any other graph takes the graph path; results
say which path ran; every chain-only feature refuses a graph network with the one message of
:func:`sheaflinalg.network.paths.require_chain`.
"""

import re

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.network.paths import CHAIN, GRAPH, engine

RNG = np.random.default_rng(3)
CHAIN_NET = sl.Network.random([3, 5, 2], seed=1)
X = RNG.uniform(-1, 1, size=(4, 3))
Y = RNG.uniform(-1, 1, size=(4, 2))


def _nodes(slope=None):
    """``CHAIN_NET`` written as nodes; with ``slope``, its ReLU a LeakyReLU (a graph network)."""
    (W1, W2), (b1, b2) = CHAIN_NET.weights, CHAIN_NET.biases
    act = Node("act", "relu", ["fc1"]) if slope is None else Node("act", "leaky_relu", ["fc1"],
                                                                   {"negative_slope": slope})
    return [Node("fc1", "linear", ["x"], params={"weight": W1, "bias": b1}), act,
            Node("fc2", "linear", ["act"], params={"weight": W2, "bias": b2})]


FROM_NODES = sl.Network.from_nodes((3,), _nodes())
GRAPH_NET = sl.Network.from_nodes((3,), _nodes(slope=0.0))


def test_the_switch_chooses_by_shape_not_by_constructor():
    assert engine(CHAIN_NET) == engine(FROM_NODES) == CHAIN
    assert engine(GRAPH_NET) == GRAPH
    assert engine(sl.Network.from_graph(CHAIN_NET.graph)) == CHAIN
    assert [net.is_graph for net in (CHAIN_NET, FROM_NODES, GRAPH_NET)] == [False, False, True]


@pytest.mark.parametrize("net, path", [(CHAIN_NET, CHAIN), (FROM_NODES, CHAIN), (GRAPH_NET, GRAPH)])
def test_results_say_which_path_ran(net, path):
    assert sl.heat(net, X, dt=0.05, max_steps=20, tol=0.0, progress=False).path == path
    assert sl.spectrum(net, X, progress=False).path == path
    assert sl.verify(net, X).path == path
    assert sl.train(net, X, Y, steps=3, progress=False).path == path
    assert sl.sgd(net, X, Y, epochs=2, progress=False).path == path
    if path == CHAIN:
        assert sl.heat(net, X[:1], method="exact").path == CHAIN


def test_a_chain_built_from_nodes_runs_the_chain_kernels_bit_for_bit():
    a = sl.heat(CHAIN_NET, X, dt=0.05, max_steps=50, tol=0.0, seed=0, progress=False)
    b = sl.heat(FROM_NODES, X, dt=0.05, max_steps=50, tol=0.0, seed=0, progress=False)
    assert a.state.tobytes() == b.state.tobytes() and a.steps == b.steps
    assert a.sliding is not None and b.sliding is not None        # sliding episodes: a chain-path feature


REFUSALS = {
    "heat(method='exact')": (lambda net: sl.heat(net, X, method="exact"), "use method='euler'"),
    "train(method='imex')": (lambda net: sl.train(net, X, Y, method="imex", progress=False),
                             "train graph networks with method='euler'"),
    "sl.convergence_study": (lambda net: sl.convergence_study(net, X), "graph networks enter sl.assemble"),
    "net.weights": (lambda net: net.weights, "read net.graph.node(name).params"),
}


@pytest.mark.parametrize("feature", sorted(REFUSALS))
def test_chain_only_features_refuse_a_graph_with_the_one_message(feature):
    call, instead = REFUSALS[feature]
    message = (f"{feature} takes chains of Linear/ReLU layers only; net is a graph network "
               f"(3 nodes: leaky_relu, linear): {instead}")
    with pytest.raises(sl.GraphNetworkError, match=re.escape(message)):
        call(GRAPH_NET)
