"""The sheaf layer on graph networks against the naive dense twin (tests/helpers/naive_graph.py).

Random graphs (tests/helpers/random_graphs.py): 1-D and 2-D convolutions with groups,
dilation, padding and stride, average/adaptive/max pools, batch norm, residual
additions, concatenations, skips from any earlier node, linear layers, reshapes, ReLU
and LeakyReLU, on flat, 1-D and 2-D inputs, chains or branching, over every pattern
kind (mixed, all active, all dead, exact zero pre-activations with max-pool ties).
"""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from helpers import naive_graph
from helpers.random_graphs import graph_networks, random_graph, random_inputs, random_pattern
from helpers.strategies import network_input_pattern
import sheaflinalg as sl
from sheaflinalg.network.errors import GraphNetworkError
from sheaflinalg.sheaf.assembled.assembly import system_bytes
from sheaflinalg.sheaf.harmonic import graph_extension
from sheaflinalg.sheaf.assembled.system import SheafSystem
from sheaflinalg.sheaf.verification.verify import unit_lower_triangular_certificate

OUTPUTS = ("identity", "sigmoid", "tanh", "softmax")


def _naive_batch(net, layout, X, pattern, reduced):
    """Block-diagonal dense delta, full boundary values and edge offset of a batch."""
    parts = [naive_graph.coboundary(net.graph, layout, X[s], {k: v[s] for k, v in pattern.items()}, reduced)
             for s in range(X.shape[0])]
    return (scipy.linalg.block_diag(*[p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


def _columns(index, width, M):
    return (index[None, :] + width * np.arange(M)[:, None]).ravel()


def _close(a, b, rtol=1e-12):
    a = a.toarray() if sp.issparse(a) else a
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, np.abs(b).max(initial=0.0)))


@given(case=graph_networks(outputs=OUTPUTS), reduced=st.booleans())
def test_assembled_blocks_equal_the_naive_dense_construction(case, reduced):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    s = sl.assemble(net, X, reduced=reduced)
    lay = s.layout
    flat = X.reshape(2, -1)
    for i in range(2):      # the forward pass's pattern is the naive one (first maximum, z >= 0 active)
        _, used = naive_graph.forward(net.graph, flat[i])
        for name, p in used.items():      # a tangent's point: the naive values (products), up to rounding
            np.testing.assert_allclose(s.pattern[name][i], p, rtol=1e-12, atol=1e-12)
    D, u_full, offset = _naive_batch(net, lay, flat, s.pattern, reduced)
    free, bnd = _columns(lay.free_index, lay.n_full, 2), _columns(lay.boundary_index, lay.n_full, 2)
    _close(s.delta, D)
    _close(s.delta_free, D[:, free])
    _close(s.delta_boundary, D[:, bnd])
    np.testing.assert_array_equal(s.u, u_full[bnd])
    _close(s.edge_offset, offset)
    _close(s.laplacian, D.T @ D)
    _close(s.laplacian_free, D[:, free].T @ D[:, free])
    _close(s.laplacian_boundary, D[:, free].T @ D[:, bnd])
    red = s.reduced_layout
    Dr, _, _ = _naive_batch(net, red, flat, s.pattern, True)
    fr = _columns(red.free_index, red.n_full, 2)
    _close(s.laplacian_reduced, Dr[:, fr].T @ Dr[:, fr])


@given(case=graph_networks(outputs=OUTPUTS))
def test_delta_omega_is_unit_lower_triangular_and_the_harmonic_extension_is_the_forward_pass(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode)
    s = sl.assemble(net, X)
    assert unit_lower_triangular_certificate(s.delta_free) == (True, "")
    h = sl.harmonic_extension(net, X)
    np.testing.assert_array_equal(h.output, net.forward(X))
    rhs = -(s.delta_boundary @ s.u + s.edge_offset)
    scale = max(1.0, np.abs(h.free).max())
    np.testing.assert_allclose(s.delta_free @ h.free.ravel(), rhs, rtol=0, atol=1e-12 * scale)
    solved = sp.linalg.spsolve_triangular(s.delta_free.tocsr(), rhs, lower=True)
    np.testing.assert_allclose(solved, h.free.ravel(), rtol=0, atol=1e-10 * scale)
    for i, x in enumerate(X.reshape(3, -1)):
        values, _ = naive_graph.forward(net.graph, x)
        for node in net.graph.nodes:
            np.testing.assert_allclose(h.node(node.name)[i], values[node.name], rtol=1e-12, atol=1e-12 * scale)
    assert sl.verify(net, X).status == "PASSED"


@given(case=graph_networks())
def test_a_frozen_pattern_is_solved_by_forward_substitution(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    pattern = random_pattern(net, np.random.default_rng(seed), 2)
    h = sl.harmonic_extension(net, X, pattern=pattern)
    s = sl.assemble(net, X, pattern=pattern)
    D, u_full, _ = _naive_batch(net, s.layout, X.reshape(2, -1), pattern, False)
    _close(s.delta, D)
    for i, x in enumerate(X.reshape(2, -1)):
        values, _ = naive_graph.forward(net.graph, x, {k: v[i] for k, v in pattern.items()})
        for node in net.graph.nodes:
            _close(h.node(node.name)[i], values[node.name], rtol=1e-10)
    agrees = np.ones(2, dtype=bool)       # the pattern agrees with the values it produced:
    for name in net.graph.pattern_nodes:
        node = net.graph.node(name)
        z = h.node(node.inputs[0]) if node.inputs[0] != "x" else X.reshape(2, -1)
        if node.op == "maxpool":       # any maximum of its window
            shapes = net.graph.shapes[node.inputs[0]], net.graph.shapes[name]
            best = np.stack([naive_graph.maxpool_argmax(node, *shapes, z[i]) for i in range(2)])
            agrees &= np.all(np.take_along_axis(z, pattern[name], 1) == np.take_along_axis(z, best, 1), 1)
        elif node.rule.smooth:         # a tangent agrees at its own linearisation point only (all its parents)
            z = np.concatenate([h.node(u) if u != "x" else X.reshape(2, -1) for u in node.inputs], axis=1)
            agrees &= np.all(z == pattern[name], axis=1)
        elif node.op == "clamp":       # a tie at a bound takes either of its pieces
            agrees &= np.all(naive_graph.clamp_pieces_agree(node.attrs, z, pattern[name]), axis=1)
        else:                          # a pre-activation exactly 0 takes either label
            agrees &= np.all((pattern[name] == (z >= 0)) | (z == 0), axis=1)
    np.testing.assert_array_equal(h.self_consistent, agrees)


def _pool_net(pool, relu=None):
    """x (1, 4) -> maxpool 2 -> [relu] -> flatten -> linear with weights 1."""
    from sheaflinalg.network.graph import Node

    nodes = [Node(pool, "maxpool", ["x"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1})]
    if relu:
        nodes.append(Node(relu, "relu", [pool]))
    nodes += [Node("flat", "reshape", [nodes[-1].name], {"shape": (2,)}),
              Node("head", "linear", ["flat"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})]
    return sl.Network.from_nodes((1, 4), nodes)


def test_max_pool_ties_any_maximum_agrees():
    net = _pool_net("pool")
    X = np.array([[1.0, 1.0, 2.0, 2.0]])
    assert net.evaluate(X).pattern["pool"].tolist() == [[0, 2]]          # the first maximum, as torch
    h = sl.harmonic_extension(net, X, pattern={"pool": [1, 3]})          # the other maximum of each window
    assert h.self_consistent.tolist() == [True] and h.output.tolist() == [[3.0]]
    assert sl.harmonic_extension(net, X + [[0, 1e-9, 0, 0]], pattern={"pool": [0, 2]}).self_consistent.tolist() \
        == [False]


@given(case=graph_networks(), data=st.data())
def test_complete_with_a_clamped_node_solves_the_pinned_normal_equations(case, data):
    net, seed, mode = case
    x = random_inputs(net, seed, 1, mode).reshape(1, -1)
    nodes = [n.name for n in net.graph.nodes[:-1]]
    name = data.draw(st.sampled_from(nodes))
    rng = np.random.default_rng(seed)
    size = net.graph.sizes[name]
    whole = data.draw(st.booleans())
    selector = name if whole else f"{name}[0:{max(1, size // 2)}]"
    n_pinned = size if whole else max(1, size // 2)
    values = rng.normal(size=n_pinned)
    pattern = net.evaluate(x).pattern
    c = sl.complete(net, x, pins={selector: values}, pattern=pattern)
    lay = c.layout
    D, u_full, offset = naive_graph.coboundary(net.graph, lay, x[0], {k: v[0] for k, v in pattern.items()},
                                               lay.reduced)
    pinned = lay.free_index[lay.free(name)][:n_pinned]
    u_full[pinned] = values
    free = np.setdiff1d(lay.free_index, pinned)
    bnd = np.setdiff1d(np.arange(lay.n_full), free)
    omega, *_ = np.linalg.lstsq(D[:, free], -(D[:, bnd] @ u_full[bnd] + offset), rcond=None)
    expected = np.zeros(lay.n_full)
    expected[free], expected[bnd] = omega, u_full[bnd]
    np.testing.assert_array_equal(c.block(name)[0, :n_pinned], values)
    scale = max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(c.state[0], expected[lay.free_index], rtol=0, atol=1e-8 * scale)


@given(network_input_pattern())
def test_the_chain_graph_gives_the_mlp_sheaf_bit_for_bit(case):
    net, x, pattern, _ = case
    X = np.stack([x, -x])
    masks = pattern if pattern is not None else net.activation_pattern(X)
    masks = [np.broadcast_to(m, (2, m.shape[-1])) for m in masks]
    by_name = {f"a{l}": m for l, m in enumerate(masks, start=1)}
    lay, glay = sl.Layout(net.dims), sl.Layout.from_graph(net.graph)
    assert [(b.size, b.offset, b.kind == "ones") for b in lay.full_blocks] == \
        [(b.size, b.offset, b.kind == "ones") for b in glay.full_blocks]
    for reduced in (False, True):
        chain = SheafSystem(net, X, masks, reduced=reduced)
        graph = SheafSystem(net, X, by_name, reduced=reduced, as_graph=True)
        for attr in ("delta", "delta_free", "delta_boundary", "laplacian", "laplacian_free", "laplacian_boundary"):
            a, b = getattr(chain, attr), getattr(graph, attr)
            for part in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(a, part), getattr(b, part), err_msg=attr)
        np.testing.assert_array_equal(chain.u, graph.u)
        np.testing.assert_array_equal(chain.edge_offset, graph.edge_offset)
    h = sl.harmonic_extension(net, X, pattern=masks)
    g = graph_extension(net.graph, X, by_name)
    np.testing.assert_array_equal(h.free, g.free)


def test_layout_of_a_graph_labels_nodes_and_ones_blocks():
    net = random_graph(3, "mixed")
    lay = sl.Layout.for_network(net)
    names = [b.name for b in lay.free_blocks]
    assert names == [n.name for n in net.graph.nodes] + ["yhat"]
    assert [b.name for b in lay.edge_blocks] == [f"e_{n}" for n in names[:-1]] + ["e_y"]
    ones = [b.name for b in lay.boundary_blocks if b.kind == "ones"]
    assert ones == [f"1>{n.name}" for n in net.graph.nodes if n.rule.has_bias]
    assert lay.n_free == lay.n_edges and len(lay.full_labels) == lay.n_full
    assert lay.free_labels[lay.free("head").start] == "head[0]"
    with pytest.raises(GraphNetworkError):
        lay.kernel_offsets()
    with pytest.raises(GraphNetworkError, match="h.node"):
        sl.harmonic_extension(net, random_inputs(net, 3, 1)).preactivations


def test_bad_graph_patterns_and_selectors_are_refused():
    net = _pool_net("blk.pool", "blk.act")
    x = np.arange(4.0)
    good = {"blk.pool": [1, 3], "blk.act": [True, False]}
    with pytest.raises(TypeError, match="dict"):
        sl.assemble(net, x, pattern=[[True, False]])
    with pytest.raises(ValueError, match=r"missing \['blk.act'\]"):
        sl.assemble(net, x, pattern={"blk.pool": [1, 3]})
    with pytest.raises(ValueError, match="integer argmax"):
        sl.harmonic_extension(net, x, pattern={**good, "blk.pool": [True, False]})
    with pytest.raises(ValueError, match="not a position inside its window"):
        sl.assemble(net, x, pattern={**good, "blk.pool": [1, 1]})
    with pytest.raises(ValueError, match="expected"):
        sl.complete(net, x, pattern={**good, "blk.act": [True]})
    with pytest.raises(ValueError, match="always pinned"):
        sl.complete(net, x, pins={"1>head": 0.0})
    with pytest.raises(ValueError, match="features per sample"):
        sl.assemble(net, np.zeros(5))
    c = sl.complete(net, x, pins={"blk.pool[1]": -1.0})
    np.testing.assert_allclose(c.block("blk.act")[0], [1.0, 0.0], rtol=0, atol=1e-14)
    assert c.settled and c.pattern["blk.act"].tolist() == [[True, False]]


@given(case=graph_networks())
def test_the_memory_estimate_bounds_the_assembled_system(case):
    net, seed, mode = case
    s = sl.assemble(net, random_inputs(net, seed, 1, mode))
    assert system_bytes(net, 1) >= 16 * (s.delta.nnz + s.laplacian_free.nnz)
