"""Pinned equilibria and partial clamping: exact solves against dense least squares and against
the pinned heat dynamics (paper section 5.1 and its note on partial clamping)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.naive import sheaf
from helpers.naive_pins import naive_augmented
from helpers.strategies import networks
import sheaflinalg as sl


def dense_completion(net, x, masks, hard_pos, hard_vals, free_inputs=(), soft=None, lam=0.0, reduced=False,
                     minimum_norm=False):
    """Least squares ``min ||D_free w + D_bnd u + offset||`` from the dense definitions (numpy lstsq)."""
    ref = sheaf(net.weights, net.biases, net.output, x, masks, reduced=reduced)
    sp_, sv, sg = soft if soft is not None else ([], [], [])
    Df, Db, u, off, cols = naive_augmented(ref, x, np.asarray(hard_pos, int), np.asarray(hard_vals, float),
                                           np.asarray(sp_, int), np.asarray(sv, float), np.asarray(sg, float),
                                           lam, np.zeros(ref["free"].sum()), free_inputs)
    w, *_ = np.linalg.lstsq(Df, -(Db @ u + off), rcond=None)
    return w, cols


@given(networks(max_hidden=3, max_width=7), st.integers(0, 2**31 - 1), st.booleans())
def test_frozen_pattern_completion_equals_dense_least_squares(case, seed, soft):
    net, _ = case
    if net.output != "identity":
        net = sl.Network(net.weights, net.biases, "identity")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=net.dims[0])
    lay = sl.Layout(net.dims, reduced=True)
    pattern = [rng.random(n) < 0.5 for n in net.dims[1:-1]]
    perm = rng.permutation(lay.n_free)
    hard_pos = np.sort(perm[:rng.integers(0, lay.n_free)])
    hard_vals = rng.normal(size=hard_pos.size)
    soft_pos = np.sort(perm[hard_pos.size:hard_pos.size + 2]) if soft else np.array([], int)
    soft_vals = rng.normal(size=soft_pos.size)
    gam = np.full(soft_pos.size, 7.0)
    labels = lay.free_labels
    c = sl.complete(net, x, pins={labels[p]: v for p, v in zip(hard_pos, hard_vals)}, pattern=pattern,
                    soft_pins=({labels[p]: v for p, v in zip(soft_pos, soft_vals)}, 7.0) if soft else None)
    w, cols = dense_completion(net, x, pattern, hard_pos, hard_vals, soft=(soft_pos, soft_vals, gam),
                               reduced=True)
    keep = np.setdiff1d(np.arange(lay.n_free), hard_pos)
    np.testing.assert_allclose(c.state[0, keep], w, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(c.state[0, hard_pos], hard_vals)
    square = hard_pos.size == 0 and soft_pos.size == 0   # delta_Omega square unitriangular: substitution
    assert c.unique and c.method == ("substitution" if square else "cholesky") and c.iterations == 1


@pytest.mark.parametrize("output", ["identity", "sigmoid", "tanh", "softmax"])
def test_settled_completion_is_the_pinned_heat_equilibrium(output):
    # Pinning can create several self-consistent patterns (local minima, the paper's note), so
    # the two directions are checked separately: (1) the exact solve with the pattern the dynamics
    # settled in is the dynamics' equilibrium; (2) a settled completion is an equilibrium of the
    # dynamics (started there, they do not move).
    dims = [2, 6, 5, 2]
    rng = np.random.default_rng(4)
    checked = 0
    for seed in range(8):
        net = sl.Network.random(dims, seed=seed, output=output)
        X = rng.uniform(-2, 2, size=(2, 2))
        pin = {"a1[1]": 1.5, "z2[0]": -0.3}
        h = sl.heat(net, X, pins=pin, dt=0.02, tol=1e-14, max_steps=400_000, seed=seed, progress=False)
        zs = [h.block(f"z{l}") for l in (1, 2)]
        if not h.converged or min(np.abs(z).min() for z in zs) < 1e-6:
            continue  # equilibrium on a switching surface (the paper's note): no clean comparison
        c = sl.complete(net, X, pins=pin, pattern=[z >= 0 for z in zs])
        assert c.settled
        np.testing.assert_allclose(h.state, c.state, rtol=0, atol=1e-9)
        c2 = sl.complete(net, X, pins=pin)
        if c2.settled:
            back = sl.heat(net, X, pins=pin, dt=0.02, tol=1e-14, init=c2.state, progress=False)
            assert back.converged
            np.testing.assert_allclose(back.state, c2.state, rtol=0, atol=1e-9)
        checked += 1
    assert checked >= 4


def test_no_clamp_gives_the_forward_pass_and_hard_pin_changes_equilibrium():
    net = sl.Network.random([2, 6, 4, 4, 1], seed=1, output="sigmoid")
    X = np.random.default_rng(0).uniform(-2, 2, size=(3, 2))
    c = sl.complete(net, X)
    np.testing.assert_allclose(c.output, net.forward(X), atol=1e-12)
    assert c.settled and np.all(c.discord < 1e-20)
    h = sl.heat(net, X, pins={"a2[0]": 3.0}, dt=0.01, tol=1e-13, seed=2, progress=False)
    assert h.converged
    assert np.abs(h.output - net.forward(X)).max() > 1e-3   # pinning changed the equilibrium
    np.testing.assert_array_equal(h.block("a2")[:, 0], 3.0)
    # Upstream layers moved too (the constraint propagates both ways).
    free = sl.heat(net, X, dt=0.01, tol=1e-13, seed=2, progress=False)
    assert np.abs(h.block("z1") - free.block("z1")).max() > 1e-3


def test_soft_pins_approach_the_hard_pin_as_gamma_grows():
    net = sl.Network.random([2, 5, 4, 1], seed=3)
    X = np.random.default_rng(1).uniform(-2, 2, size=(2, 2))
    target = {"a1[2]": 2.0}
    hard = sl.complete(net, X, pins=target)
    hard_heat = sl.heat(net, X, pins=target, dt=0.02, tol=1e-14, seed=0, progress=False)
    np.testing.assert_allclose(hard_heat.state, hard.state, atol=1e-9)
    gaps_exact, gaps_heat = [], []
    for gamma in (1.0, 10.0, 100.0, 1e4):
        soft = sl.complete(net, X, soft_pins=(target, gamma))
        gaps_exact.append(np.abs(soft.state - hard.state).max())
        dt = 1.9 / (sl.lambda_max_bound(net, gamma_max=gamma))
        sh = sl.heat(net, X, soft_pins=(target, gamma), dt=dt, tol=1e-14, max_steps=2_000_000, seed=0,
                     progress=False)
        assert sh.converged
        np.testing.assert_allclose(sh.state, soft.state, atol=1e-8)
        gaps_heat.append(np.abs(sh.state - hard.state).max())
    assert all(a > b for a, b in zip(gaps_exact, gaps_exact[1:]))
    assert all(a > b for a, b in zip(gaps_heat, gaps_heat[1:]))
    assert gaps_exact[-1] < 1e-3 * gaps_exact[0]


def test_output_clamp_with_identity_output_matches_dynamics_with_output_vertex():
    net = sl.Network.random([2, 5, 1], seed=8)
    X = np.random.default_rng(2).uniform(-2, 2, size=(3, 2))
    Y = np.array([[0.5], [-0.5], [1.0]])
    c = sl.complete(net, X, pins={"yhat": Y})
    assert not c.layout.reduced
    # Sample 0's pinned equilibrium sits on a switching surface: the pattern cycles and the
    # dynamics slide there (the paper's note on partial clamping).
    assert list(c.settled_samples) == [False, True, True] and not c.settled
    h = sl.heat(net, X, pins={"yhat": Y}, dt=0.05, tol=1e-14, max_steps=50_000, seed=1, progress=False)
    assert not h.converged
    assert len(h.sliding) >= 1 and set(h.sliding[:, 0]) == {0}
    np.testing.assert_allclose(h.state[1:], c.state[1:], atol=1e-9)
    z_slide = h.block("z1")[0]
    assert np.abs(z_slide).min() < 1e-2   # trapped near z = 0


def test_imputation_of_an_input_from_a_clamped_output():
    net = sl.Network.random([2, 4, 1], seed=5)
    x = np.array([[0.3, -0.8]])
    y = net.forward(x) + 0.05
    c = sl.complete(net, x, pins={"yhat": y}, free_inputs=[0])
    assert c.unique and c.settled
    # A zero-discord completion exists (move x0 until the output hits y), so the completion is a
    # global section: the forward pass of the imputed input reproduces the clamped output.
    assert c.discord[0] < 1e-20
    np.testing.assert_allclose(net.forward(c.inputs), y, atol=1e-10)
    assert c.inputs[0, 1] == x[0, 1] and c.inputs[0, 0] != x[0, 0]


def test_non_unique_completion_is_detected_and_resolved():
    net = sl.Network.random([2, 4, 1], seed=5)
    x = np.array([[0.3, -0.8]])
    y = net.forward(x) + 0.05
    with pytest.raises(sl.NonUniqueCompletionError, match="not unique.*minimum_norm.*reluctance"):
        sl.complete(net, x, pins={"yhat": y}, free_inputs=[0, 1])
    c = sl.complete(net, x, pins={"yhat": y}, free_inputs=[0, 1], nonunique="minimum_norm",
                    pattern=net.activation_pattern(x))
    assert not c.unique and c.method == "minimum_norm"
    masks = [m[0] for m in net.activation_pattern(x)]
    w, cols = dense_completion(net, x[0], masks, [5 + 4], y[0], free_inputs=[0, 1])
    lay = c.layout
    mine = np.concatenate([c.inputs[0], np.delete(c.state[0], lay.free("yhat"))])
    np.testing.assert_allclose(mine, w, atol=1e-8)   # lstsq returns the minimum-norm solution
    r = sl.complete(net, x, pins={"yhat": y}, free_inputs=[0, 1], reluctance=1e-6)
    assert r.unique and r.method == "cholesky"
    np.testing.assert_allclose(r.output, y, atol=1e-5)
    # Singular but square: all hidden activations clamped and the pattern dead cuts x off.
    with pytest.raises(sl.NonUniqueCompletionError, match="singular"):
        sl.complete(net, x, pins={"a1": 0.5}, free_inputs=[0], pattern=[np.zeros(4, bool)])


def test_bad_clamp_arguments():
    net = sl.Network.random([2, 4, 1], seed=5)
    with pytest.raises(ValueError, match="nonunique"):
        sl.complete(net, [0.1, 0.2], nonunique="lstsq")
    with pytest.raises(ValueError, match="max_iter"):
        sl.complete(net, [0.1, 0.2], max_iter=0)
    with pytest.raises(ValueError, match="no free block"):
        sl.complete(net, [0.1, 0.2], pins={"b1": 0.0})
    with pytest.raises(ValueError, match="free_inputs"):
        sl.complete(net, [0.1, 0.2], free_inputs=[3])
