"""The matrix-free coboundary of graph networks against the assembled sparse ``delta_Omega``.

The assembled matrices are tested against the naive dense twin (tests/sheaf/test_graph_sheaf.py); here
the products, the transpose and both substitutions must agree with them on random graphs, every
pattern kind (the forward pass's own and random frozen ones), every output, reduced or not.
"""

import numpy as np
import scipy.sparse.linalg as spla
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.random_graphs import graph_networks, random_graph, random_inputs, random_pattern
import sheaflinalg as sl
from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary
from sheaflinalg.sheaf.patterns import output_jacobian


def _jacobians(net, h):
    out = h.node(net.graph.output_node)
    blocks = [output_jacobian(net.output, z) for z in out]
    return np.stack([np.diag(J) if J.ndim == 1 else J for J in blocks])


@settings(max_examples=20)
@given(case=graph_networks(outputs=("identity", "sigmoid", "softmax")), reduced=st.booleans(), frozen=st.booleans())
def test_products_and_substitutions_equal_the_assembled_delta(case, reduced, frozen):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    rng = np.random.default_rng(seed)
    pattern = random_pattern(net, rng, 2) if frozen else None
    h = sl.harmonic_extension(net, X, pattern=pattern)
    jac = None if reduced else _jacobians(net, h)
    op = GraphCoboundary(net.graph, h.pattern, jac)
    D = sl.assemble(net, X, pattern=h.pattern, reduced=reduced).delta_free
    n = op.layout.n_free
    assert D.shape == (2 * n, 2 * n)
    w = rng.normal(size=(2, n))
    np.testing.assert_allclose(op.apply(w).ravel(), D @ w.ravel(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.apply_transpose(w).ravel(), D.T @ w.ravel(), rtol=1e-12, atol=1e-12)
    solved = spla.spsolve_triangular(D.tocsr(), w.ravel(), lower=True)
    np.testing.assert_allclose(op.solve(w).ravel(), solved, rtol=1e-10, atol=1e-10)
    solved_t = spla.spsolve_triangular(D.T.tocsr(), w.ravel(), lower=False)
    np.testing.assert_allclose(op.solve_transpose(w).ravel(), solved_t, rtol=1e-10, atol=1e-10)


def test_substitutions_invert_the_products_on_a_residual_cnn():
    net = random_graph(7, "mixed")
    X = random_inputs(net, 7, 3)
    op = GraphCoboundary(net.graph, sl.harmonic_extension(net, X).pattern)
    w = np.random.default_rng(0).normal(size=(3, op.layout.n_free))
    np.testing.assert_allclose(op.solve(op.apply(w)), w, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(op.apply_transpose(op.solve_transpose(w)), w, rtol=1e-10, atol=1e-10)


@settings(max_examples=15)
@given(case=graph_networks(outputs=("identity", "softmax")), reduced=st.booleans())
def test_substitutions_into_a_used_buffer_write_every_block_and_equal_the_fresh_ones(case, reduced):
    # the substitutions write each block once, without zeroing the buffer first: nothing of what it held
    # (NaN here) may survive, on graphs whose nodes have several children (additions, concatenations)
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode)
    h = sl.harmonic_extension(net, X)
    op = GraphCoboundary(net.graph, h.pattern, None if reduced else _jacobians(net, h))
    w = np.random.default_rng(seed).normal(size=(3, op.layout.n_free))
    for substitution in (op.solve, op.solve_transpose):
        used = np.full_like(w, np.nan)
        assert substitution(w, out=used) is used
        np.testing.assert_array_equal(used, substitution(w))
        np.testing.assert_allclose(op.apply(used) if substitution == op.solve else op.apply_transpose(used), w,
                                   rtol=1e-9, atol=1e-9)
