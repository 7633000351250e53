"""Augmented assembly (hard pins, soft-pin edges, reluctance edges, freed inputs) against dense
matrices built from the paper's definitions (eq. pinning-maps, appendix C.2)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from helpers.naive import masks_of, sheaf
from helpers.naive_pins import naive_augmented
from helpers.strategies import network_input_pattern
import sheaflinalg as sl


@given(network_input_pattern(max_hidden=3, max_width=6), st.integers(0, 2**31 - 1),
       st.booleans(), st.booleans(), st.booleans())
def test_augmented_blocks_match_dense_definitions(case, seed, use_soft, use_rel, free_x):
    net, x, pattern, _ = case
    rng = np.random.default_rng(seed)
    masks = masks_of(net, x, pattern)
    ref = sheaf(net.weights, net.biases, net.output, x, masks)
    lay = sl.Layout(net.dims)
    labels = lay.free_labels
    perm = rng.permutation(lay.n_free)
    n_hard = rng.integers(0, max(1, lay.n_free // 2))
    hard_pos = np.sort(perm[:n_hard])
    soft_pos = np.sort(perm[n_hard:n_hard + rng.integers(1, 4)]) if use_soft else np.array([], int)
    hard_vals = rng.normal(size=hard_pos.size)
    soft_vals = rng.normal(size=soft_pos.size)
    gam = rng.uniform(0.5, 20.0, size=soft_pos.size)
    lam = float(rng.uniform(0.01, 2.0)) if use_rel else 0.0
    anchor = rng.normal(size=lay.n_free)
    free_inputs = [0] if free_x else []
    pins = {labels[p]: v for p, v in zip(hard_pos, hard_vals)}
    soft = sl.SoftPins({labels[p]: v for p, v in zip(soft_pos, soft_vals)},
                       {labels[p]: g for p, g in zip(soft_pos, gam)}) if use_soft else None
    rel = sl.Reluctance(lam, anchor) if use_rel else None
    s = sl.assemble(net, x, pattern=pattern, pins=pins, soft_pins=soft, reluctance=rel,
                    free_inputs=free_inputs)
    Df, Db, u, off, omega_cols = naive_augmented(ref, x, hard_pos, hard_vals, soft_pos, soft_vals, gam,
                                                 lam, anchor, free_inputs)
    assert isinstance(s, sl.AugmentedSheafSystem)
    for name in ("delta_free", "delta_boundary", "laplacian_free", "laplacian_boundary"):
        m = getattr(s, name)
        assert sp.isspmatrix_csr(m) and m.dtype == np.float64, name
    close = dict(rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(s.delta_free.toarray(), Df, **close)
    np.testing.assert_allclose(s.delta_boundary.toarray(), Db, **close)
    np.testing.assert_allclose(s.u, u, **close)
    np.testing.assert_allclose(s.edge_offset, off, **close)
    np.testing.assert_allclose(s.laplacian_free.toarray(), Df.T @ Df, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.laplacian_boundary.toarray(), Df.T @ Db, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.rhs(), -Df.T @ (Db @ u + off), rtol=1e-12, atol=1e-12)
    assert len(s.free_labels) == Df.shape[1] and len(s.boundary_labels) == Db.shape[1]
    assert len(s.edge_labels) == Df.shape[0]
    full_labels = lay.full_labels
    assert s.free_labels == [full_labels[c] for c in omega_cols]
    # Tall exactly when extra edges are present.
    assert Df.shape[0] == lay.n_edges + soft_pos.size + (Df.shape[1] if use_rel else 0)


def test_batch_is_block_diagonal_with_per_sample_pin_values(rng):
    net = sl.Network.random([2, 3, 3, 2], seed=3, output="softmax")
    X = rng.normal(size=(3, 2))
    vals = rng.normal(size=(3, 2))
    s = sl.assemble(net, X, pins={"a1[0,2]": vals}, soft_pins=({"z2": 0.5}, 3.0), reluctance=0.1)
    n_e, n_f = s.n_edges_sample, s.n_free_sample
    for i in range(3):
        one = sl.assemble(net, X[i], pins={"a1[0,2]": vals[i]}, soft_pins=({"z2": 0.5}, 3.0),
                          reluctance=0.1)
        blk = s.delta_free[i * n_e:(i + 1) * n_e, i * n_f:(i + 1) * n_f].toarray()
        np.testing.assert_allclose(blk, one.delta_free.toarray(), rtol=1e-14, atol=1e-15)
        nb = s.n_boundary_sample
        np.testing.assert_array_equal(s.u[i * nb:(i + 1) * nb], one.u)
    off_diag = s.delta_free[:n_e, n_f:].toarray()
    assert not off_diag.any()


def test_plain_assemble_unchanged():
    net = sl.Network.random([2, 3, 1], seed=0)
    s = sl.assemble(net, [0.5, -1.0])
    assert type(s) is sl.SheafSystem
    assert s.delta_free.shape == (8, 8)


def test_hard_pins_make_pinned_solution_exact():
    # With every hidden activation pinned, z2 = W2 p + b2 is forced: the completion is the pinned forward pass.
    net = sl.Network.random([2, 4, 1], seed=1)
    p = np.array([0.3, -0.2, 1.0, 0.0])
    s = sl.assemble(net, [0.4, 0.1], pins={"a1": p}, reduced=True)
    from sheaflinalg.sheaf.assembled.factor import cholesky

    omega = cholesky(s.laplacian_free).solve(s.rhs())
    z2 = omega[[i for i, lab in enumerate(s.free_labels) if lab.startswith("z2")]]
    np.testing.assert_allclose(z2, net.weights[1] @ p + net.biases[1], rtol=1e-12)


@pytest.mark.parametrize("spec, match", [
    ({"q1": 0.0}, "no free block 'q1'"),
    ({"a1[7]": 0.0}, "out of range"),
    ({"a1[0,0]": 0.0}, "repeats"),
    ({"a1": [1.0, 2.0]}, "one entry per selected coordinate"),
    ({"a1[0]": np.nan}, "NaN"),
    ({"x[0]": 1.0}, "always pinned"),
    ({"a1[0]": "a"}, "numeric"),
    ({"a1[x]": 1.0}, "integers"),
    ({"a1[0]": 1.0, "a1[0:2]": 1.0}, "more than once"),
])
def test_bad_pins_are_refused(spec, match):
    net = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises((ValueError, TypeError), match=match):
        sl.assemble(net, [0.5, -1.0], pins=spec)
    with pytest.raises((ValueError, TypeError), match=match):
        sl.heat(net, [0.5, -1.0], pins=spec, max_steps=1, progress=False)


def test_bad_soft_pins_and_reluctance_are_refused():
    net = sl.Network.random([2, 3, 1], seed=0)
    x = [0.5, -1.0]
    with pytest.raises(ValueError, match="both hard-pinned and soft-pinned"):
        sl.assemble(net, x, pins={"a1[0]": 1.0}, soft_pins=({"a1": 0.0}, 1.0))
    with pytest.raises(ValueError, match="gamma must be a finite number > 0"):
        sl.assemble(net, x, soft_pins=({"a1": 0.0}, -1.0))
    with pytest.raises(ValueError, match="gamma dict must cover"):
        sl.assemble(net, x, soft_pins=sl.SoftPins({"a1": 0.0}, {"z1": 1.0}))
    with pytest.raises(TypeError, match="soft_pins must be"):
        sl.assemble(net, x, soft_pins={"a1": 0.0})
    with pytest.raises(ValueError, match="reluctance strength"):
        sl.assemble(net, x, reluctance=0.0)
    with pytest.raises(ValueError, match="reduced system without the output vertex"):
        sl.assemble(net, x, pins={"yhat": 0.0}, reduced=True)
    with pytest.raises(ValueError, match="free_inputs"):
        sl.assemble(net, x, free_inputs=[2])
    with pytest.raises(TypeError, match="pins must be a dict"):
        sl.assemble(net, x, pins=[("a1", 0.0)])
