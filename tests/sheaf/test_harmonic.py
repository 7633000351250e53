"""Harmonic extension by block forward substitution against dense solves and the forward pass."""

import numpy as np
from hypothesis import given

from helpers.naive import forward, frozen_solution, sheaf
from helpers.strategies import network_input_pattern, networks
import sheaflinalg as sl


def layout_order(zs, acts, yhat):
    parts = []
    for z, a in zip(zs[:-1], acts):
        parts += [z, a]
    return np.concatenate(parts + [zs[-1], yhat])


@given(network_input_pattern())
def test_harmonic_extension_solves_the_dense_system(case):
    net, x, pattern, kind = case
    h = sl.harmonic_extension(net, x, pattern=pattern)
    masks = h.pattern if pattern is None else [np.asarray(m, bool) for m in pattern]
    masks = [np.asarray(m).reshape(-1) for m in masks]
    ref = sheaf(net.weights, net.biases, net.output, x, masks)
    D = ref["delta"]
    Dfree, Dbnd = D[:, ref["free"]], D[:, ref["fixed"]]
    omega = np.linalg.solve(Dfree, -(Dbnd @ ref["u"] + ref["edge_offset"]))
    scale = max(1.0, np.abs(omega).max())
    assert np.max(np.abs(h.free[0] - omega)) <= 1e-10 * scale
    zs, acts, yhat = frozen_solution(net.weights, net.biases, net.output, x, masks)
    assert np.max(np.abs(h.free[0] - layout_order(zs, acts, yhat))) <= 1e-12 * scale
    if pattern is None:
        assert h.self_consistent.all()


@given(networks())
def test_default_harmonic_extension_is_the_forward_pass_batched(case):
    net, seed = case
    X = np.random.default_rng(seed).uniform(-2, 2, size=(7, net.dims[0]))
    h = sl.harmonic_extension(net, X)
    for s in range(7):
        zs, acts, yhat = forward(net.weights, net.biases, net.output, X[s])
        ref = layout_order(zs, acts, yhat)
        assert np.max(np.abs(h.free[s] - ref)) <= 1e-12 * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(h.output, net.forward(X), rtol=1e-12, atol=1e-300)
    assert h.self_consistent.all()


def test_inconsistent_frozen_pattern_is_detected():
    net = sl.Network.random([2, 6, 1], seed=0)
    x = np.array([0.5, 1.0])
    flipped = [~net.activation_pattern(x)[0]]
    h = sl.harmonic_extension(net, x, pattern=flipped)
    assert not h.self_consistent[0]
    assert sl.harmonic_extension(net, x, pattern=net.activation_pattern(x)).self_consistent[0]


def test_zero_preactivations_accept_either_label():
    net = sl.Network.random([2, 3, 1], seed=0)
    x = np.zeros(2)  # zero biases: every z1 is exactly 0
    for mask in (np.ones(3, bool), np.zeros(3, bool)):
        h = sl.harmonic_extension(net, x, pattern=[mask])
        assert h.self_consistent[0]
        np.testing.assert_array_equal(h.output, net.forward(x[None, :]))


def test_a_graph_extensions_free_cochain_is_its_node_values_in_layout_order():
    from helpers.random_graphs import random_graph, random_inputs

    net = random_graph(3)
    X = random_inputs(net, 4, 5)
    h = sl.harmonic_extension(net, X)
    assert h._free is None            # laid out only when read
    for block in h.layout.free_blocks:
        expected = h.output if block.name == "yhat" else h.values[block.name]
        np.testing.assert_array_equal(h.free[:, h.layout.free(block.name)], expected)
        np.testing.assert_array_equal(h.node(block.name), expected)
