"""The assembler against the naive edge-by-edge dense coboundary (tests/helpers/naive.py)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given

from helpers.naive import masks_of, reduced_laplacian_formula, sheaf
from helpers.strategies import network_input_pattern
import sheaflinalg as sl


@given(network_input_pattern())
def test_every_block_matches_naive_coboundary(case):
    net, x, pattern, _ = case
    masks = masks_of(net, x, pattern)
    ref = sheaf(net.weights, net.biases, net.output, x, masks)
    s = sl.assemble(net, x, pattern=pattern)
    D = ref["delta"]
    free, fixed = ref["free"], ref["fixed"]
    for name in ("delta", "delta_free", "delta_boundary", "laplacian", "laplacian_free",
                 "laplacian_boundary", "laplacian_reduced"):
        m = getattr(s, name)
        assert sp.isspmatrix_csr(m) and m.dtype == np.float64, name
    # Exact except the softmax Jacobian, whose two formulas differ in the last bit.
    close = dict(rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(s.delta.toarray(), D, **close)
    np.testing.assert_allclose(s.delta_free.toarray(), D[:, free], **close)
    np.testing.assert_allclose(s.delta_boundary.toarray(), D[:, fixed], **close)
    np.testing.assert_array_equal(s.u, ref["u"])
    np.testing.assert_allclose(s.edge_offset, ref["edge_offset"], rtol=1e-14, atol=1e-15)
    L = D.T @ D
    np.testing.assert_allclose(s.laplacian.toarray(), L, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.laplacian_free.toarray(), L[np.ix_(free, free)], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.laplacian_boundary.toarray(), L[np.ix_(free, fixed)], rtol=1e-13, atol=1e-13)


@given(network_input_pattern())
def test_reduced_laplacian_is_appendix_formula_and_schur_complement(case):
    net, x, pattern, _ = case
    masks = masks_of(net, x, pattern)
    s = sl.assemble(net, x, pattern=pattern)
    formula = reduced_laplacian_formula(net.weights, masks)
    np.testing.assert_allclose(s.laplacian_reduced.toarray(), formula, rtol=1e-13, atol=1e-13)
    Lf = s.laplacian_free.toarray()
    y = s.layout.free("yhat")
    keep = np.ones(Lf.shape[0], dtype=bool)
    keep[y] = False
    schur = Lf[np.ix_(keep, keep)] - Lf[np.ix_(keep, ~keep)] @ np.linalg.solve(Lf[np.ix_(~keep, ~keep)],
                                                                             Lf[np.ix_(~keep, keep)])
    np.testing.assert_allclose(s.laplacian_reduced.toarray(), schur, rtol=1e-10, atol=1e-10)
    # Same via the reduced sheaf's own coboundary.
    r = sl.assemble(net, x, pattern=pattern, reduced=True)
    np.testing.assert_allclose((r.delta_free.T @ r.delta_free).toarray(), formula, rtol=1e-13, atol=1e-13)


@given(network_input_pattern())
def test_delta_free_is_unit_lower_triangular_with_unit_determinant(case):
    net, x, pattern, _ = case
    s = sl.assemble(net, x, pattern=pattern)
    Dense = s.delta_free.toarray()
    assert Dense.shape[0] == Dense.shape[1]
    np.testing.assert_array_equal(np.triu(Dense, 1), 0.0)
    np.testing.assert_array_equal(np.diag(Dense), 1.0)
    sign, logdet = np.linalg.slogdet(Dense)
    assert sign == 1.0 and abs(logdet) < 1e-12
    sign, logdet = np.linalg.slogdet(s.laplacian_free.toarray())
    assert sign == 1.0 and abs(logdet) < 1e-8


def test_batch_is_block_diagonal_sample_major(rng):
    net = sl.Network.random([3, 5, 4, 2], seed=3, output="softmax")
    X = rng.normal(size=(4, 3))
    batch = sl.assemble(net, X)
    singles = [sl.assemble(net, x) for x in X]
    for name in ("delta", "delta_free", "delta_boundary", "laplacian_free", "laplacian_boundary",
                 "laplacian_reduced", "laplacian"):
        expected = sp.block_diag([getattr(s, name) for s in singles]).toarray()
        # Batched matrix products may differ from single ones in the last bit.
        np.testing.assert_allclose(getattr(batch, name).toarray(), expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(batch.u, np.concatenate([s.u for s in singles]))


def test_frozen_pattern_changes_the_matrices():
    net = sl.Network.random([2, 3, 1], seed=0)
    x = np.array([0.3, -0.7])
    dead = sl.assemble(net, x, pattern=[np.zeros(3, dtype=bool)])
    active = sl.assemble(net, x, pattern=[np.ones(3, dtype=bool)])
    lay = active.layout
    block = active.delta_free.toarray()[lay.edge("e_a1"), lay.free("z1")]
    np.testing.assert_array_equal(block, -np.eye(3))
    np.testing.assert_array_equal(dead.delta_free.toarray()[lay.edge("e_a1"), lay.free("z1")], 0.0)


def test_layout_labels_and_slices_cover_every_coordinate():
    lay = sl.Layout([2, 3, 4, 1])
    assert lay.free_labels[:4] == ["z1[0]", "z1[1]", "z1[2]", "a1[0]"]
    assert len(lay.free_labels) == lay.n_free == 2 * 3 + 2 * 4 + 1 + 1
    assert len(lay.edge_labels) == lay.n_edges == lay.n_free
    assert sorted(np.concatenate([lay.free_index, lay.boundary_index]).tolist()) == list(range(lay.n_full))
    assert [b.name for b in lay.boundary_blocks] == ["x", "1@x", "1@a1", "1@a2"]
    assert [b.size for b in lay.boundary_blocks] == [2, 3, 4, 1]
    with pytest.raises(KeyError, match="no free block 'a3'; expected one of z1, a1, z2, a2, z3, yhat"):
        lay.free("a3")
    with pytest.raises(KeyError, match="no free block 'a11'; did you mean 'a1'"):
        lay.free("a11")


def test_bad_patterns_are_refused():
    net = sl.Network.random([2, 3, 4, 1], seed=0)
    x = np.zeros(2)
    with pytest.raises(ValueError, match="one mask per hidden layer"):
        sl.assemble(net, x, pattern=[np.ones(3, dtype=bool)])
    with pytest.raises(ValueError, match="shape"):
        sl.assemble(net, x, pattern=[np.ones(4, dtype=bool), np.ones(4, dtype=bool)])
    with pytest.raises(ValueError, match="boolean"):
        sl.assemble(net, x, pattern=[np.full(3, 0.5), np.ones(4)])
    with pytest.raises(ValueError, match="shape"):
        sl.harmonic_extension(net, np.zeros((2, 2)), pattern=[np.ones((3, 3), bool), np.ones((2, 4), bool)])
