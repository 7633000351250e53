"""Tiled kernel paths (samples swept in column ranges) against whole-batch runs and naive dense references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.kernel_steps import kernel_step
from helpers.naive_training import naive_step
from helpers.strategies import networks
import sheaflinalg as sl
import sheaflinalg.kernels.heat as kheat
from sheaflinalg.kernels.force import compute_forces, compute_forces_range, force_sweep, step_rows, tile_width
from sheaflinalg.kernels.potentials import (LOSS_CODES, OUTPUT_EDGE_ADJOINT, OUTPUT_EDGE_DISCREPANCY,
                                            OUTPUT_EDGE_NONE, PHI_CODES)
from sheaflinalg.kernels.structs import OutputEdge, Scratch, heat_step, train_step
from sheaflinalg.kernels.training import weight_velocity
from sheaflinalg.kernels.products import outer_sums_range


def kernel_args(net, M, rng, reduced):
    lay = sl.Layout(net.dims, reduced=reduced)
    off = lay.kernel_offsets()
    X = rng.uniform(-2, 2, size=(net.dims[0], M))
    S = rng.normal(size=(lay.n_free, M))
    S[rng.random(S.shape) < 0.2] = 0.0                      # zero pre-activations: the mask's edge case
    return lay, off, X, S


def force_call(off, X, S, theta, out_mode, phi, loss_kind, loss_param, dims_max, s0=None, s1=None):
    M = S.shape[1]
    F, E = np.full_like(S, np.nan), np.full_like(S, np.nan)
    scratch = Scratch(F, E, np.zeros((off.n_out, M)), np.zeros((dims_max, M)))
    args = (X, S, theta, off, OutputEdge(out_mode, phi, loss_kind, loss_param), scratch)
    if s0 is None:
        compute_forces(*args)
    else:
        compute_forces_range(*args, s0, s1)
    return F, E


def sweep_case(case, M, mode, loss):
    """A drawn network (identity output for the reduced system, mode "none"), its kernel inputs and codes."""
    net, seed = case
    rng = np.random.default_rng(seed)
    if mode == "none":
        net = sl.Network(net.weights, net.biases, "identity")
    lay, off, X, S = kernel_args(net, M, rng, reduced=mode == "none")
    out_mode = {"none": OUTPUT_EDGE_NONE, "adjoint": OUTPUT_EDGE_ADJOINT,
                "discrepancy": OUTPUT_EDGE_DISCREPANCY}[mode]
    return net, rng, lay, off, X, S, net.parameters(), out_mode, LOSS_CODES[loss]


@given(networks(max_hidden=3, max_width=9), st.integers(1, 41), st.sampled_from([1, 3, 8, 16]),
       st.sampled_from(["none", "adjoint", "discrepancy"]), st.sampled_from(["squared", "l1", "huber"]))
@settings(max_examples=30, deadline=None)
def test_tile_sweep_gives_the_whole_batch_forces_exactly(case, M, T, mode, loss):
    net, rng, lay, off, X, S, theta, out_mode, lk = sweep_case(case, M, mode, loss)
    common = (off, X, S, theta, out_mode, PHI_CODES[net.output], lk, 0.4, max(net.dims))
    F_all, E_all = force_call(*common)
    F, E = np.full_like(S, np.nan), np.full_like(S, np.nan)
    for t0 in range(0, M, T):                                # M not a multiple of T in most draws
        Ft, Et = force_call(*common, t0, min(t0 + T, M))
        F[:, t0:t0 + T], E[:, t0:t0 + T] = Ft[:, t0:t0 + T], Et[:, t0:t0 + T]
        # Nothing outside the range is written.
        assert np.isnan(np.delete(Ft, np.s_[t0:t0 + T], axis=1)).all()
    np.testing.assert_array_equal(F, F_all)
    np.testing.assert_array_equal(E, E_all)
    # Weight-edge discrepancies from their definition, z_l - W_l a_(l-1) - b_l (dense numpy).
    a = X
    for l, (W, b) in enumerate(zip(net.weights, net.biases), start=1):
        zo = off.zoff[l]
        z = S[zo:zo + W.shape[0]]
        np.testing.assert_allclose(E[zo:zo + W.shape[0]], z - W @ a - b[:, None], rtol=1e-12, atol=1e-12)
        if l < len(net.weights):
            a = S[off.aoff[l]:off.aoff[l] + W.shape[0]]


@given(networks(max_hidden=3, max_width=9), st.integers(1, 41), st.sampled_from([1, 3, 8, 64]),
       st.sampled_from(["none", "adjoint", "discrepancy"]), st.sampled_from(["squared", "huber"]),
       st.floats(0.0, 0.6), st.sampled_from(["count", "velocity"]))
@settings(max_examples=40, deadline=None)
def test_fused_step_equals_the_step_from_stored_forces(case, M, T, mode, loss, pinned, extra):
    """force_sweep with a step (no forces stored) against S + scale * F from the stored-force mode."""
    net, rng, lay, off, X, S, theta, out_mode, lk = sweep_case(case, M, mode, loss)
    phi = PHI_CODES[net.output]
    F, E = force_call(off, X, S, theta, out_mode, phi, lk, 0.4, max(net.dims))
    # Pinned rows (scale 0, e.g. targets or hard pins) must be copied unchanged.  A unit step on
    # the others: a smaller one would round away differences in the last bits of the forces.
    scale = np.where(rng.random(lay.n_free) < pinned, 0.0, 1.0)
    tol = 0.3
    expected = S + scale[:, None] * F
    S_out = np.full_like(S, np.nan)
    E_s, F_s = np.zeros_like(S), np.zeros_like(S)
    scratch = Scratch(F_s, E_s, np.zeros((net.dims[-1], M)), np.zeros((max(net.dims), M)))
    edge = OutputEdge(out_mode, phi, lk, 0.4)
    flips = np.full(lay.n_free, -1, dtype=np.int64)
    velocity = np.full(net.n_parameters, np.nan)
    big = total = 0.0
    for t0 in range(0, M, T):
        t1 = min(t0 + T, M)
        args = (X, S, S_out, theta, off, edge, scratch, t0, t1)
        if extra == "count":
            b, t = force_sweep(*args, heat_step(scale, tol, flips), None)
        else:
            b, t = force_sweep(*args, train_step(scale, velocity, t0 > 0), None)
        big, total = big + b, total + t
    # Bit for bit the step taken from the stored forces (the kernels' recording path) ...
    stepped = np.empty_like(S)
    step_rows(S, stepped, F, 0, lay.n_free, scale, None, None, 0, M)
    np.testing.assert_array_equal(S_out, stepped)
    # ... and S + scale F up to the one rounding an FMA saves.
    assert np.all(np.abs(S_out - expected) <= 2.0**-51 * (np.abs(S) + np.abs(scale[:, None] * F)))
    np.testing.assert_allclose(total, (scale[:, None] * F).sum(), rtol=1e-12, atol=1e-12)
    if extra == "count":
        assert big == (np.abs(scale[:, None] * F) >= tol).sum()
        hidden_z = [off.zoff[l] + j for l in range(1, len(net.dims) - 1) for j in range(net.dims[l])]
        changed = ((expected >= 0) != (S >= 0)).sum(axis=1)
        np.testing.assert_array_equal(flips[hidden_z] > 0, changed[hidden_z] > 0)
    else:
        assert big == 0.0
        ref = np.zeros(net.n_parameters)
        weight_velocity(X, S, E, off, ref)
        np.testing.assert_allclose(velocity, ref, rtol=1e-12, atol=1e-12)


def test_tile_width_fits_the_budget_and_keeps_whole_batches_for_blas_layers():
    dims = np.array([2, 30, 1])
    assert tile_width(dims, 61, 300) == 300                  # fits: one tile
    t = tile_width(dims, 61, 100_000)
    assert 64 <= t < 100_000 and t % 8 == 0 and 24 * 61 * t <= sl.kernels.force.TILE_BYTES
    assert tile_width(np.array([64, 256, 10]), 600, 5000) == 5000   # BLAS even on a tile: whole batch
    assert tile_width(np.array([64, 256, 10]), 600, 50) == 50


@pytest.mark.parametrize("m", range(0, 10))
@pytest.mark.parametrize("accumulate", [False, True])
def test_outer_sums_range_matches_numpy(m, accumulate):
    rng = np.random.default_rng(m)
    M, n = 29, 3
    E, A = rng.normal(size=(n + 2, M)), rng.normal(size=(m + 1, M))
    w0, b0 = rng.normal(size=n * m), rng.normal(size=n)
    w, b = w0.copy(), b0.copy()
    s0, s1 = 5, 26
    outer_sums_range(E, 2, n, A, 1, m, w, b, s0, s1, accumulate)
    W_ref = E[2:2 + n, s0:s1] @ A[1:1 + m, s0:s1].T
    b_ref = E[2:2 + n, s0:s1].sum(axis=1)
    if accumulate:
        W_ref, b_ref = W_ref + w0.reshape(n, m), b_ref + b0
    np.testing.assert_allclose(w, W_ref.ravel(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(b, b_ref, rtol=1e-13, atol=1e-13)


def train_kernel(net, X, Y, state, loss, p, n_steps, tile, reg=None):
    trained, S = kernel_step(net, X, Y, state, loss, p, 0.7, 0.3, 0.01, reg, n_steps=n_steps, tile=tile)
    return trained.parameters(), S


@pytest.mark.parametrize("dims,output,loss", [([2, 6, 4, 1], "identity", "mse"),
                                              ([3, 5, 3], "softmax", "cross_entropy"),
                                              ([2, 7, 2], "sigmoid", "huber")])
def test_tiled_training_steps_match_naive_dense_steps_for_every_tile_width(dims, output, loss):
    rng = np.random.default_rng(7)
    net = sl.Network.random(dims, seed=3, output=output)
    M = 23
    X = rng.uniform(-2, 2, size=(M, dims[0]))
    if output == "softmax":
        Y = np.eye(dims[-1])[rng.integers(0, dims[-1], M)]
    else:
        Y = rng.uniform(0, 1, size=(M, dims[-1]))
    p = 0.3 if loss == "huber" else 0.0
    n_move = sl.Layout(dims).kernel_offsets().yhat_off
    state = rng.normal(size=(M, n_move))
    reg = sl.Regularization(lam=0.2, mu=0.1, kind="l2")
    ref_net, ref_state = net, state
    for _ in range(3):
        ref_net, ref_state = naive_step(ref_net, X, Y, ref_state, loss, p, 0.7, 0.3, 0.01, reg,
                                        np.zeros_like(state), np.zeros(net.n_parameters))
    results = {T: train_kernel(net, X, Y, state, loss, p, 3, T, reg) for T in (1, 5, 8, 22, M, 0)}
    for T, (theta, S) in results.items():
        np.testing.assert_allclose(S, ref_state, rtol=1e-12, atol=1e-12, err_msg=f"tile {T}")
        np.testing.assert_allclose(theta, ref_net.parameters(), rtol=1e-12, atol=1e-12, err_msg=f"tile {T}")
        # Tiles only reorder the batch sums of the weight velocity.
        np.testing.assert_allclose(theta, results[M][0], rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(S, results[M][1], rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("M,output", [(1, "identity"), (37, "sigmoid"), (64, "softmax")])
def test_tiled_heat_runs_equal_the_one_tile_run_bit_for_bit(monkeypatch, M, output):
    dims = [2, 6, 4, 3] if output == "softmax" else [2, 6, 4, 1]
    net = sl.Network.random(dims, seed=2, output=output)
    X = np.random.default_rng(4).uniform(-2, 2, size=(M, 2))
    kw = dict(dt=0.05, max_steps=150, tol=0.0, seed=1, progress=False, record_every=40, record_states=[0])
    orig = kheat.heat_run
    runs = {}
    for T in sorted({1, 8, 13, M}):
        monkeypatch.setattr(kheat, "heat_run", lambda *a, T=T: orig(*a[:-1], T))
        runs[T] = sl.heat(net, X, **kw)
    ref = runs[M]
    for T, res in runs.items():
        np.testing.assert_array_equal(res.state, ref.state, err_msg=f"tile {T}")
        np.testing.assert_array_equal(res.crossings, ref.crossings)
        assert res.steps == ref.steps and res.final_change == ref.final_change
        np.testing.assert_array_equal(res.history.discord, ref.history.discord)
        np.testing.assert_array_equal(res.history.states, ref.history.states)
        np.testing.assert_array_equal(res.edge_discrepancy, ref.edge_discrepancy)
