"""The fused forward pass (network/graph/fusion.py): batch norms and additions with the rectifier that reads
them, and their checks, in one pass.  Equal bit for bit to the node-by-node pass on random graphs, equal to a
dense twin written from the definitions on a small residual block (exact zero pre-activations included), and an
overflow is named as node by node."""

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.naive_graph import conv_dense
from helpers.random_graphs import CNN_STEPS, graph_networks, random_inputs
from sheaflinalg.network.errors import NetworkOverflowError
from sheaflinalg.network.graph import Graph, Node, forward
from sheaflinalg.network.graph.fusion import fusion_plan

CONV = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}


def residual_block(slope, rng, scale=None):
    """conv-BN-rectifier, conv-BN, add the first rectifier, rectifier; exact zeros among the shifts (``scale``:
    the second batch norm's, default random)."""
    def conv(name, parent):
        return Node(name, "conv", [parent], CONV, {"weight": rng.normal(size=(3, 3, 3, 3)), "bias": np.zeros(3)})

    def bn(name, parent, given=None):
        return Node(name, "batchnorm", [parent], params={"scale": rng.normal(size=3) if given is None else given,
                                                         "shift": np.array([0.0, 0.5, -0.5])})

    rect = ("leaky_relu", {"negative_slope": slope}) if slope else ("relu", {})
    return Graph((3, 4, 4), [conv("c1", "x"), bn("b1", "c1"), Node("r1", rect[0], ["b1"], rect[1]),
                             conv("c2", "r1"), bn("b2", "c2", scale), Node("s", "add", ["b2", "r1"]),
                             Node("r2", rect[0], ["s"], rect[1])])


def dense_block(graph, X, slope):
    """Every node's value from the definitions: dense convolutions, ``scale * z + shift``, ``z >= 0`` active."""
    values, masks = {"x": X}, {}
    for node in graph.nodes:
        z = [values[p] for p in node.inputs]
        if node.op == "conv":
            values[node.name] = z[0] @ conv_dense(node, (3, 4, 4), (3, 4, 4)).T
        elif node.op == "batchnorm":
            values[node.name] = (z[0].reshape(len(X), 3, 16) * node.params["scale"][:, None]
                                 + node.params["shift"][:, None]).reshape(len(X), -1)
        elif node.op == "add":
            values[node.name] = z[0] + z[1]
        else:
            masks[node.name] = z[0] >= 0
            values[node.name] = np.where(masks[node.name], z[0], slope * z[0])
    return values, masks


@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_the_fused_pass_equals_the_dense_definitions_and_the_node_by_node_pass(slope):
    rng = np.random.default_rng(0)
    g = residual_block(slope, rng)
    plan = fusion_plan(g)
    assert [(g.nodes[u.k].name, u.then and g.nodes[u.then].name) for u in plan if u.checked] == [("b1", "r1"),
                                                                                                  ("b2", None),
                                                                                                  ("s", "r2")]
    assert [g.nodes[u.k].name for u in plan if not u.check] == ["c1", "c2"]    # checked by their batch norms
    X = rng.normal(size=(7, 48))
    X[:3] = 0.0                                     # every pre-activation is a shift: exact zeros
    fused, alone = forward.evaluate(g, X), forward.evaluate(g, X, fuse=False)
    dense, masks = dense_block(g, X, slope)
    assert np.sum(fused.values["b1"] == 0) > 0
    for name, value in fused.values.items():
        assert np.array_equal(value, alone.values[name]), name
        np.testing.assert_allclose(value, dense[name], rtol=1e-12, atol=1e-12)
    for name, mask in masks.items():
        assert np.array_equal(fused.pattern[name], alone.pattern[name]) and np.array_equal(fused.pattern[name], mask)


@settings(max_examples=15, deadline=None)
@given(graph_networks(steps=CNN_STEPS, max_layers=4))
def test_the_fused_pass_is_the_node_by_node_pass_bit_for_bit(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 5, mode).reshape(5, -1)
    for threads in (1, 2):
        fused, alone = forward.evaluate(net.graph, X, threads=threads), forward.evaluate(net.graph, X, fuse=False)
        for name, value in alone.values.items():
            assert np.array_equal(fused.values[name], value), name
        for name, p in alone.pattern.items():
            assert np.array_equal(fused.pattern[name], p), name


@pytest.mark.parametrize("where, node", [("input", "c1"), ("scale", "b2")])
def test_an_overflow_is_named_as_node_by_node(where, node):
    g = residual_block(0.0, np.random.default_rng(1), None if where == "input" else np.full(3, 1e308))
    X = np.random.default_rng(2).normal(size=(6, 48))
    if where == "input":
        X[4, 5] = np.inf        # the convolution's value is checked by its batch norm
    else:
        X *= 1e3
    with pytest.raises(NetworkOverflowError, match=rf"node '{node}' .*sample {4 if where == 'input' else 0}"):
        forward.evaluate(g, X)
