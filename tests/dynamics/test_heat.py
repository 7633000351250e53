"""Heat-equation kernel and driver against naive dense Euler steps built from the paper's
definitions (eq. neural-restricted, eq. final-dynamics, eq. pinning-maps)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.naive import forward, phi, phi_jacobian, sheaf
from helpers.naive_pins import naive_augmented
from helpers.strategies import networks
import sheaflinalg as sl

STATE_KINDS = ("mixed", "all_active", "all_dead", "zero_preactivations")


def z_rows(dims, reduced):
    """Positions of z_1..z_{k+1} in the free order (z1, a1, ..., z(k+1), yhat), built by hand."""
    k = len(dims) - 2
    rows, o = [], 0
    for l in range(1, k + 2):
        rows.append(np.arange(o, o + dims[l]))
        o += 2 * dims[l] if l <= k else dims[l]
    return rows


def naive_step(net, x, omega, alpha, dt, reduced, output_force="adjoint", pins=None, soft=None,
               lam=0.0, anchor=None):
    """``omega - alpha dt (L[Om,Om] omega + L[Om,U] u + delta_Om^T offset)`` from the dense sheaf.

    The pattern is ``z >= 0`` of ``omega``; a nonlinear output edge is linearised at the current
    ``z(k+1)`` (so its force is exactly ``-J^T (phi(z) - yhat)``), or with ``J = I`` for the
    discrepancy force.  ``pins``: (positions, values); ``soft``: (positions, targets, gammas).
    """
    dims = net.dims
    k = len(dims) - 2
    zr = z_rows(dims, reduced)
    masks = [omega[zr[l]] >= 0 for l in range(k)]
    ref = sheaf(net.weights, net.biases, net.output, x, masks, reduced=reduced)
    if not reduced:
        n = dims[-1]
        D = ref["delta"]
        z = omega[zr[-1]]
        J = np.eye(n) if output_force == "discrepancy" else phi_jacobian(net.output, z)
        zcols = np.arange(D.shape[1] - 2 * n, D.shape[1] - n)
        D[-n:, zcols] = -J
        ref["edge_offset"][-n:] = J @ z - phi(net.output, z)
    hard_pos, hard_vals = pins if pins is not None else (np.array([], int), np.array([]))
    soft_pos, soft_vals, gam = soft if soft is not None else (np.array([], int), np.array([]), np.array([]))
    if anchor is None:
        anchor = np.zeros(omega.size)
    Df, Db, u, off, _ = naive_augmented(ref, x, hard_pos, hard_vals, soft_pos, soft_vals, gam, lam, anchor)
    keep = np.setdiff1d(np.arange(omega.size), hard_pos)
    w = omega[keep]
    w_new = w - alpha * dt * (Df.T @ Df @ w + Df.T @ Db @ u + Df.T @ off)
    out = omega.copy()
    out[keep] = w_new
    return out


def random_state(net, n_free, kind, rng, reduced):
    omega = rng.normal(size=n_free)
    rows = z_rows(net.dims, reduced)[:-1]
    for r in rows:
        if kind == "all_active":
            omega[r] = np.abs(omega[r])
        elif kind == "all_dead":
            omega[r] = -np.abs(omega[r]) - 1e-3
        elif kind == "zero_preactivations":
            omega[r[::2]] = 0.0
    return omega


@given(networks(max_hidden=3, max_width=8), st.sampled_from(STATE_KINDS), st.integers(0, 2**31 - 1),
       st.sampled_from(("adjoint", "discrepancy")), st.sampled_from([3, 20]))
def test_one_compiled_step_matches_naive_dense_step(case, kind, seed, output_force, M):
    # M = 3 and M = 20 take the kernel's plain-loop and row-wise vectorised update paths.
    net, _ = case
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(M, net.dims[0]))
    reduced = net.output == "identity" and output_force == "adjoint" and seed % 2 == 0
    lay = sl.Layout(net.dims, reduced=reduced)
    states = np.array([random_state(net, lay.n_free, kind, rng, reduced) for _ in range(M)])
    alpha, dt = 0.7, 0.013
    res = sl.heat(net, X, alpha=alpha, dt=dt, max_steps=1, tol=0.0, init=states, reduced=reduced,
                  output_force=output_force, progress=False)
    assert res.steps == 1 and not res.converged
    for s in range(M):
        expected = naive_step(net, X[s], states[s], alpha, dt, reduced, output_force)
        np.testing.assert_allclose(res.state[s], expected, rtol=0, atol=1e-13)


@given(networks(max_hidden=2, max_width=6), st.integers(0, 2**31 - 1))
def test_one_step_with_pins_soft_pins_and_reluctance_matches_dense_step(case, seed):
    net, _ = case
    rng = np.random.default_rng(seed)
    lay = sl.Layout(net.dims)
    labels = lay.free_labels
    perm = rng.permutation(lay.n_free)
    n_hard = int(rng.integers(0, lay.n_free // 2 + 1))
    hard_pos = np.sort(perm[:n_hard])
    soft_pos = np.sort(perm[n_hard:n_hard + 2])
    hard_vals = rng.normal(size=hard_pos.size)
    soft_vals = rng.normal(size=soft_pos.size)
    gam = rng.uniform(0.5, 5.0, size=soft_pos.size)
    lam = 0.3
    anchor = rng.normal(size=lay.n_free)
    x = rng.uniform(-2, 2, size=net.dims[0])
    omega = random_state(net, lay.n_free, "mixed", rng, False)
    res = sl.heat(net, x, dt=0.01, max_steps=1, tol=0.0, init=omega[None], reduced=False,
                  pins={labels[p]: v for p, v in zip(hard_pos, hard_vals)},
                  soft_pins=sl.SoftPins({labels[p]: v for p, v in zip(soft_pos, soft_vals)},
                                        {labels[p]: g for p, g in zip(soft_pos, gam)}),
                  reluctance=sl.Reluctance(lam, anchor), progress=False)
    start = omega.copy()
    start[hard_pos] = hard_vals
    expected = naive_step(net, x, start, 1.0, 0.01, False, pins=(hard_pos, hard_vals),
                          soft=(soft_pos, soft_vals, gam), lam=lam, anchor=anchor)
    np.testing.assert_allclose(res.state[0], expected, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(res.state[0, hard_pos], hard_vals)


@pytest.mark.parametrize("dims, output", [([2, 4, 1], "identity"), ([2, 6, 4, 4, 1], "sigmoid")])
def test_converges_to_forward_pass_from_random_stalks(dims, output):
    net = sl.Network.random(dims, seed=7, output=output)
    X = np.random.default_rng(0).uniform(-2, 2, size=(20, 2))
    for batch in (X[:1], X[:4], X):   # one sample, plain-loop and vectorised batch paths
        res = sl.heat(net, batch, alpha=1.0, dt=0.01, tol=1e-13, max_steps=400_000, init="random",
                      seed=3, record_every=25, progress=False)
        assert res.converged and res.final_change < 1e-13
        zs, acts, _ = zip(*[forward(net.weights, net.biases, output, x) for x in batch])
        np.testing.assert_allclose(res.output, net.forward(batch), rtol=0, atol=1e-10)
        for l in range(len(dims) - 2):
            np.testing.assert_allclose(res.block(f"z{l + 1}"), np.array([z[l] for z in zs]), atol=1e-10)
            np.testing.assert_allclose(res.block(f"a{l + 1}"), np.array([a[l] for a in acts]), atol=1e-10)
        tot = res.history.total
        assert tot[-1] < 1e-20 * len(batch)
        # Monotone decrease (up to rounding at the machine-precision floor).
        assert np.all(np.diff(tot) <= 1e-12 * tot[:-1] + 1e-28)


def test_discord_decreases_every_step_for_stable_dt():
    net = sl.Network.random([2, 6, 4, 4, 1], seed=2, output="sigmoid")
    X = np.random.default_rng(5).uniform(-2, 2, size=(3, 2))
    res = sl.heat(net, X, dt=0.01, max_steps=3000, tol=0, seed=1, record_every=1, progress=False)
    tot = res.history.total
    assert tot.size == 3001
    assert np.all(np.diff(tot) <= 1e-13 * tot[:-1])


def test_history_discord_matches_dense_coboundary_at_recorded_states():
    net = sl.Network.random([3, 5, 4, 2], seed=4, output="tanh")
    X = np.random.default_rng(2).uniform(-2, 2, size=(4, 3))
    res = sl.heat(net, X, dt=0.02, max_steps=200, tol=0, seed=8, record_every=10, record_states=[1, 3],
                  soft_pins=({"a2[1]": 0.7}, 4.0), progress=False)
    h = res.history
    lay = res.layout
    assert h.labels == ["e_z1", "e_a1", "e_z2", "e_a2", "e_z3", "e_y", "e_pin"]
    assert list(h.steps) == list(range(0, 201, 10))
    assert h.states.shape == (21, 2, lay.n_free)
    for i in (0, 7, 20):
        per_sample = np.zeros(4)
        for j, s in enumerate([1, 3]):
            omega = h.states[i, j]
            k = 2
            masks = [omega[r] >= 0 for r in z_rows(net.dims, False)[:k]]
            ref = sheaf(net.weights, net.biases, net.output, X[s], masks)
            D = ref["delta"]
            full = np.zeros(D.shape[1])
            full[ref["free"]] = omega
            full[ref["fixed"]] = ref["u"]
            e = D @ full
            n = net.dims[-1]
            e[-n:] = omega[-n:] - phi(net.output, omega[-2 * n:-n])  # the nonlinear output edge
            sizes = [5, 5, 4, 4, 2, 2]
            blocks = np.split(e, np.cumsum(sizes)[:-1])
            naive_blocks = [0.5 * b @ b for b in blocks]
            pin = 0.5 * 4.0 * (omega[lay.free("a2").start + 1] - 0.7) ** 2
            per_sample[s] = sum(naive_blocks) + pin
            np.testing.assert_allclose(per_sample[s], h.sample_discord[i, s], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(h.output[i, [1, 3]], h.states[i, :, lay.free("yhat")], rtol=0, atol=0)
    np.testing.assert_allclose(h.discord.sum(axis=1), h.sample_discord.sum(axis=1), rtol=1e-12)
    by_type = h.by_type()
    assert set(by_type) == {"weight", "activation", "output", "pin"}
    np.testing.assert_allclose(sum(by_type.values()), h.total, rtol=1e-12)
    by_layer = h.by_layer()
    np.testing.assert_allclose(by_layer[1], h.discord[:, 0] + h.discord[:, 1], rtol=1e-15)


@pytest.mark.parametrize("n_samples", [5, 21])   # plain loop / word-wise path of the kernel
def test_crossings_and_sliding_episodes_match_a_replay_of_the_recorded_states(n_samples):
    net = sl.Network.random([2, 8, 6, 1], seed=11)
    X = np.random.default_rng(3).uniform(-2, 2, size=(n_samples, 2))
    window, min_flips = 4, 3
    res = sl.heat(net, X, dt=0.02, max_steps=3000, tol=0, seed=5, record_every=1,
                  record_states=list(range(n_samples)), sliding_window=window, sliding_min_flips=min_flips,
                  progress=False)
    lay = res.layout
    states = res.history.states  # (steps+1, samples, n_free)
    events = []
    for l in (1, 2):
        z = states[:, :, lay.free(f"z{l}")] >= 0
        for t in range(1, z.shape[0]):
            changed = np.argwhere(z[t] != z[t - 1])
            for s, j in changed:
                events.append((t, s, l, j, int(z[t, s, j])))
    got = sorted(map(tuple, res.crossings.tolist()))
    assert got == sorted(events)
    assert res.crossings_total == len(events) > 0
    # Sliding: runs of flips of one coordinate with gaps <= window, at least min_flips long.
    episodes = []
    by_coord = {}
    for t, s, l, j, _ in sorted(events):
        by_coord.setdefault((s, l, j), []).append(t)
    for (s, l, j), ts in by_coord.items():
        run = [ts[0]]
        for t in ts[1:] + [None]:
            if t is not None and t - run[-1] <= window:
                run.append(t)
                continue
            if len(run) >= min_flips:
                episodes.append((s, l, j, run[0], run[-1], len(run)))
            if t is not None:
                run = [t]
    assert sorted(map(tuple, res.sliding.tolist())) == sorted(episodes)


def test_stability_bound_dominates_every_pattern_and_unstable_dt_is_refused():
    rng = np.random.default_rng(0)
    for dims, output in (([2, 4, 1], "identity"), ([3, 7, 5, 2], "softmax"), ([2, 6, 4, 4, 1], "sigmoid")):
        net = sl.Network.random(dims, seed=1, output=output)
        bound = sl.lambda_max_bound(net)
        for _ in range(20):
            x = rng.uniform(-2, 2, size=dims[0])
            pattern = [rng.random(n) < 0.5 for n in dims[1:-1]]
            L = sl.assemble(net, x, pattern=pattern).laplacian_free.toarray()
            assert np.linalg.eigvalsh(L).max() <= bound
        all_active = sl.assemble(net, np.zeros(dims[0]), pattern=[np.ones(n, bool) for n in dims[1:-1]])
        lam = np.linalg.eigvalsh(all_active.laplacian_free.toarray()).max()
        assert bound <= 4.0 * lam  # not absurdly loose
        dt_max = 2.0 / bound
        with pytest.raises(ValueError, match="largest stable dt is") as err:
            sl.heat(net, np.zeros(dims[0]), dt=dt_max * 1.01, max_steps=1, progress=False)
        stated = float(str(err.value).split("largest stable dt is ")[1].split(" ")[0])
        np.testing.assert_allclose(stated, dt_max, rtol=1e-5)
        sl.heat(net, np.zeros(dims[0]), dt=dt_max * 0.99, max_steps=1, progress=False)
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(ValueError, match="largest stable dt"):
        sl.heat(net, [0.0, 1.0], dt=0.05, soft_pins=({"a1": 0.0}, 1000.0), max_steps=1, progress=False)


def test_nonfinite_state_names_the_step():
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(sl.NonFiniteStateError, match=r"at Euler step \d+"):
        sl.heat(net, [0.3, 0.2], dt=5.0, max_steps=10_000, check_stability=False, progress=False)


@pytest.mark.parametrize("kwargs, match", [
    (dict(dt=0.0), "dt must be"),
    (dict(alpha=-1.0), "alpha must be"),
    (dict(max_steps=-1), "max_steps"),
    (dict(tol=-1.0), "tol"),
    (dict(init="ones"), "unknown init"),
    (dict(init=np.zeros((2, 3))), "init array must have shape"),
    (dict(output_force="jacobian"), "output_force"),
    (dict(record_states=[5], record_every=1), "record_states"),
    (dict(record_states=[0]), "record_every > 0"),
    (dict(record_every=1.5), "record_every"),
])
def test_bad_arguments_are_refused(kwargs, match):
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises((ValueError, TypeError), match=match):
        sl.heat(net, [0.3, 0.2], progress=False, **kwargs)
    with pytest.raises(ValueError, match="3 features per sample but the network takes 2"):
        sl.heat(net, [0.3, 0.2, 0.1], progress=False)
    with pytest.raises(ValueError, match="NaN"):
        sl.heat(net, [np.nan, 0.2], progress=False)


def test_output_pinned_to_labels_uses_output_vertex_and_holds_the_label():
    net = sl.Network.random([2, 5, 1], seed=3)
    X = np.random.default_rng(0).uniform(-2, 2, size=(3, 2))
    Y = np.array([[1.0], [-1.0], [0.5]])
    res = sl.heat(net, X, dt=0.05, tol=1e-13, pins={"yhat": Y}, seed=0, progress=False)
    assert not res.layout.reduced and res.converged
    np.testing.assert_array_equal(res.output, Y)
    assert res.pinned == ["yhat[0]"]
    assert not np.allclose(res.block("z2"), net.forward(X))


@pytest.mark.parametrize("output", ["identity", "sigmoid", "softmax"])
def test_kernel_discrepancies_match_assembled_coboundary_and_discord_helpers(output):
    net = sl.Network.random([3, 5, 4, 2], seed=6, output=output)
    X = np.random.default_rng(9).uniform(-2, 2, size=(3, 3))
    soft = ({"a1[1]": 0.4}, 3.0)
    res = sl.heat(net, X, dt=0.02, max_steps=150, tol=0, seed=4, soft_pins=soft, reluctance=0.05,
                  pins={"z2[0]": 0.2}, progress=False)
    lay = res.layout
    zs = [res.block(f"z{l}") for l in range(1, lay.n_hidden + 2)]
    kw = dict(pattern=[z >= 0 for z in zs[:-1]], pins={"z2[0]": 0.2}, soft_pins=soft, reluctance=0.05,
              reduced=lay.reduced)
    if not lay.reduced:
        kw["linearise_at"] = zs[-1]   # the linearised output edge is exact at its linearisation point
    s = sl.assemble(net, X, **kw)
    free = res.state[:, s.layout_free_index]
    e = sl.discord.edge_discrepancies(s, free)
    np.testing.assert_allclose(e[:, :lay.n_edges], res.edge_discrepancy, rtol=0, atol=1e-13)
    blocks = sl.discord.discord_by_block(s, free)
    assert list(blocks) == [b.name for b in lay.edge_blocks] + ["e_pin", "e_rel"]
    np.testing.assert_allclose(sum(blocks.values()), res.discord, rtol=1e-12)
    grouped = sl.discord.group(np.array([blocks[k] for k in blocks]).T, list(blocks), by="type")
    np.testing.assert_allclose(grouped["pin"], 0.5 * 3.0 * (res.block("a1")[:, 1] - 0.4) ** 2, rtol=1e-12)


@pytest.mark.parametrize("output, output_force", [("identity", "adjoint"), ("softmax", "discrepancy")])
def test_wide_layers_take_the_blas_kernel_and_match_the_naive_dense_step(output, output_force):
    from sheaflinalg.kernels.force import tile_width, uses_blas

    net = sl.Network.random([3, 120, 90, 4], seed=7, output=output)
    M = 40
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, size=(M, 3))
    reduced = output == "identity"
    lay = sl.Layout(net.dims, reduced=reduced)
    dims = lay.kernel_offsets().dims
    assert uses_blas(dims, M, tile_width(dims, lay.n_free, M))      # this batch goes to BLAS
    states = np.array([random_state(net, lay.n_free, "mixed", rng, reduced) for _ in range(M)])
    res = sl.heat(net, X, alpha=0.7, dt=0.013, max_steps=1, tol=0.0, init=states, reduced=reduced,
                  output_force=output_force, progress=False, threads=1)
    for s in range(M):
        expected = naive_step(net, X[s], states[s], 0.7, 0.013, reduced, output_force)
        np.testing.assert_allclose(res.state[s], expected, rtol=0, atol=1e-12)
