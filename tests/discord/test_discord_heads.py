"""Discord per attention head (sheaflinalg/discord/heads.py) of multi-head attention imported from torch
(``F.scaled_dot_product_attention``, two layers), against the residuals written from the definition."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import sheaflinalg as sl  # noqa: E402
from sheaflinalg.sheaf.layout import Layout  # noqa: E402

T, D, H = 5, 8, 2


class MultiHead(nn.Module):
    """``layers`` rounds of multi-head self-attention on ``(T, D)`` tokens, ``H`` heads of ``D / H`` features."""

    def __init__(self, layers=2):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList(nn.ModuleList(nn.Linear(D, D) for _ in range(4)) for _ in range(layers))

    def forward(self, x):
        for q, k, v, out in self.layers:
            heads = [layer(x).view(-1, T, H, D // H).transpose(1, 2) for layer in (q, k, v)]   # (N, H, T, d)
            x = out(F.scaled_dot_product_attention(*heads).transpose(1, 2).reshape(-1, T, D))
        return x.flatten(1)


def _moved_state(net, X, seed=1):
    lay = Layout.from_graph(net.graph)
    state = sl.harmonic_extension(net, X).free
    return lay, state + 0.1 * np.random.default_rng(seed).normal(size=state.shape)


def _naive_residuals(block, value):
    """``f(parents) - x`` of the block's three nodes from the definitions: ``alpha Q K^T``, the softmax over the
    keys, ``P V``; ``value(name)`` is one sample's value of a node in its shape."""
    scores, weights, output = (block[name] for name in ("scores", "weights", "output"))
    q, keys = (value(p) for p in scores.inputs)
    s = value(scores.name)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return {scores.name: q @ keys / math.sqrt(q.shape[-1]) - s,
            weights.name: e / e.sum(axis=-1, keepdims=True) - value(weights.name),
            output.name: value(weights.name) @ value(output.inputs[1]) - value(output.name)}


def test_per_head_discord_is_the_heads_squared_residuals():
    net = sl.Network.from_torch(MultiHead(), input_shape=(T, D))
    X = np.random.default_rng(0).normal(size=(3, T * D))
    lay, state = _moved_state(net, X)
    res = sl.discord.residuals(net, X, state)
    report = res.per_head()
    assert [b.heads for b in report.blocks] == [H, H] and len({b.name for b in report.blocks}) == 2
    graph = net.graph
    for b in report.blocks:
        nodes = {"scores": graph.node(b.scores), "weights": graph.node(b.weights), "output": graph.node(b.output)}
        assert graph.shapes[b.output] == (H, T, D // H)
        for s in range(3):
            naive = _naive_residuals(nodes, lambda name: state[s, lay.free(name)].reshape(graph.shapes[name]))
            for name, r in naive.items():
                per_head = 0.5 * (r.reshape(H, -1) ** 2).sum(axis=1)
                np.testing.assert_allclose(report.values[b.name][name][s], per_head, rtol=1e-12, atol=1e-15)
        total = sum(res.by_node()[name] for name in b.nodes)
        np.testing.assert_allclose(report.by_block()[b.name].sum(axis=1), total, rtol=1e-12)
    rows = report.rows()
    assert [(name, h) for name, h, _ in rows] == [(b.name, h) for b in report.blocks for h in range(H)]
    table = report.table().splitlines()
    assert table[0].split()[:2] == ["block", "head"] and len(table) == 1 + 2 * H


def test_by_axis_groups_a_nodes_residuals_over_any_axis():
    net = sl.Network.from_torch(MultiHead(layers=1), input_shape=(T, D))
    X = np.random.default_rng(2).normal(size=(2, T * D))
    lay, state = _moved_state(net, X, seed=3)
    res = sl.discord.residuals(net, X, state)
    (block,) = sl.discord.attention_blocks(net.graph)
    r = res[block.weights].reshape((2,) + net.graph.shapes[block.weights])     # (samples, heads, queries, keys)
    for axis, other in ((0, (2, 3)), (1, (1, 3)), (-1, (1, 2))):
        np.testing.assert_allclose(res.by_axis(block.weights, axis), 0.5 * (r ** 2).sum(axis=other), rtol=1e-12)
    np.testing.assert_array_equal(res.by_axis(block.weights, 0), res.by_channel(block.weights))
    with pytest.raises(ValueError, match=r"axis must be an integer in -3..2 \(node .* has shape \(2, 5, 5\)\), got 3"):
        res.by_axis(block.weights, 3)


def test_a_network_without_attention_has_no_heads():
    net = sl.Network.from_nodes((2,), [sl.Node("t", "tanh", ["x"])])
    res = sl.discord.residuals(net, np.zeros((1, 2)), np.zeros((1, 4)))
    assert sl.discord.attention_blocks(net.graph) == []
    with pytest.raises(ValueError, match="the network has no attention block"):
        res.per_head()
