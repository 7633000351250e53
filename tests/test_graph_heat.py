"""The sheaf heat equation on graph networks, and the stable step bound, against dense twins.

The bound on ``lambda_max(delta_P^T delta_P)`` must hold for every pattern: it is checked map by
map against the naive dense restriction maps (tests/naive_graph.py) and as a whole against the
assembled ``delta`` under random frozen patterns of every kind.
"""

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from graph_builders import MODES, random_graph, random_inputs, random_pattern
from graph_examples import every_op_network
from naive_graph import node_dense
from sheaflinalg.sheaf import graph_bound


def _graph_nets(seed, mode, output="identity"):
    return [random_graph(seed, mode, output), every_op_network(seed % 5, output)]


@pytest.mark.parametrize("fourier", [True, False])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(MODES))
def test_every_map_norm_bound_holds_for_random_patterns(fourier, seed, mode):
    rng = np.random.default_rng(seed)
    work = graph_bound.FOURIER_WORK
    graph_bound.FOURIER_WORK = work if fourier else 0.0       # False: the row/column-sum bound of convs
    try:
        for net in _graph_nets(seed, mode):
            pattern = random_pattern(net, rng, 1)
            for node in net.graph.nodes:
                bound = graph_bound.map_norm_bound(node, net.graph)
                rows = pattern[node.name][0] if node.name in pattern else None
                for _, F in node_dense(node, net.graph, rows)[0]:
                    assert np.linalg.norm(F, 2) <= bound * (1 + 1e-12) + 1e-12, (node.name, node.op)
    finally:
        graph_bound.FOURIER_WORK = work


def _check_lambda_max_bound(net, X, patterns, gamma=0.0, lam=0.0):
    bound = sl.lambda_max_bound(net, gamma_max=gamma, reluctance=lam)
    for pattern in patterns:
        D = sl.assemble(net, X, pattern=pattern, reduced=False).delta_free
        lam_max = spla.eigsh((D.T @ D).tocsc(), k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0]
        assert lam_max + gamma + lam <= bound * (1 + 1e-9), (lam_max, bound)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(MODES),
       output=st.sampled_from(("identity", "sigmoid", "softmax")), gamma=st.floats(0, 2), lam=st.floats(0, 2))
def test_lambda_max_bound_holds_for_random_patterns(seed, mode, output, gamma, lam):
    net = random_graph(seed, mode, output)
    X = random_inputs(net, seed, 1, mode).reshape(1, -1)
    _check_lambda_max_bound(net, X, [None, random_pattern(net, np.random.default_rng(seed), 1)], gamma, lam)


def test_lambda_max_bound_holds_on_every_op():
    net = every_op_network(1, "softmax")
    rng = np.random.default_rng(1)
    _check_lambda_max_bound(net, rng.normal(size=(1, 72)), [None] + [random_pattern(net, rng, 1) for _ in range(3)])


def test_conv_bound_is_the_circular_norm_when_nothing_is_cut():
    # stride 1, "same" padding of a 1-D map: a Toeplitz submatrix of the circulant; its norm is close
    W = np.random.default_rng(0).normal(size=(3, 2, 3))
    conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                   {"weight": W, "bias": np.zeros(3)})
    net = sl.Network.from_nodes((2, 40), [conv, sl.Node("r", "relu", ["c"])])
    (_, F), = node_dense(conv, net.graph, None)[0]
    exact, bound = np.linalg.norm(F, 2), graph_bound.map_norm_bound(conv, net.graph)
    assert exact <= bound <= 1.01 * exact
