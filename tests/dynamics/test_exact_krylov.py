"""The compiled Krylov engine of heat(method="exact") against the dense-eigh Python path (exact.fallback)."""

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.dynamics.exact import krylov as exact_krylov
from sheaflinalg.kernels.exact import scan as kx

KINDS = ("mixed", "all_active", "all_dead", "zero_preactivations")


def dense_path(net, X, **kw):
    """The same run with every sample forced into the Python path (a Krylov cap of 0 vectors)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exact_krylov, "KRYLOV_CAP", 0)
        return sl.heat(net, X, method="exact", **kw)


def initial_states(net, X, kind, seed):
    """Random initial states whose hidden pre-activations are all positive, all negative, mixed or some 0
    (hard pins are set by heat itself)."""
    base = sl.heat(net, X, method="exact", seed=seed, t_max=1e-300)
    S = base.sol(0.0).copy()
    rng = np.random.default_rng(seed)
    lay = base.layout
    for l in range(1, len(net.dims) - 1):
        z = lay.free(f"z{l}")
        size = z.stop - z.start
        v = np.abs(S[:, z]) + 0.05
        if kind == "all_active":
            S[:, z] = v
        elif kind == "all_dead":
            S[:, z] = -v
        elif kind == "zero_preactivations":
            S[:, z] = np.where(rng.random((S.shape[0], size)) < 0.5, 0.0, S[:, z])
    return S


def chatters(result):
    """More than two events of one unit of one sample at one instant (a Zeno loop)."""
    ev = result.events
    keys = np.stack([ev["sample"], ev["layer"], ev["neuron"]], axis=1)
    _, counts = np.unique(np.column_stack([keys, ev["time"].view(np.int64)]), axis=0, return_counts=True)
    return bool(counts.size and counts.max() > 2)


def assert_same_flow(fast, slow, rtol=1e-12):
    """Same events (kind, unit, order per sample), times and states to ~rtol relative."""
    M, n = fast.state.shape
    scale = 1.0 + np.abs(slow.state).max()
    for s in range(M):
        a, b = fast.events[fast.events["sample"] == s], slow.events[slow.events["sample"] == s]
        assert len(a) == len(b), (s, a, b)
        # A root to round-off: late crossings (small |w'|) have times good to ~1e-12 relative only.
        np.testing.assert_allclose(a["time"], b["time"], rtol=10 * rtol, atol=1e-13)
        if not len(b):
            continue
        # Events at the same time (to round-off) may come in either order: compare them as sets.
        group = np.concatenate([[0], np.cumsum(np.diff(b["time"]) > 1e-12 * (1 + b["time"][1:]))])
        for g in np.unique(group):
            units = [sorted(zip(e["layer"][group == g], e["neuron"][group == g], e["kind"][group == g],
                                e["active"][group == g])) for e in (a, b)]
            assert units[0] == units[1], (s, a, b)
    assert np.array_equal(fast.converged_samples, slow.converged_samples)
    np.testing.assert_allclose(fast.time, slow.time, rtol=1e-9)
    assert np.abs(fast.state - slow.state).max() <= 10 * rtol * scale
    assert np.abs(fast.fixed_point - slow.fixed_point).max() <= 10 * rtol * scale
    np.testing.assert_allclose(fast.decay_rate, slow.decay_rate, rtol=1e-12)
    for s in range(M):
        ts = np.linspace(0.0, min(fast.time[s], slow.time[s]), 9)
        assert np.abs(fast.sol(ts, sample=s) - slow.sol(ts, sample=s)).max() <= 10 * rtol * scale


@pytest.mark.filterwarnings("ignore:max_events=500 stopped")   # chattering examples are skipped below
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.sampled_from(KINDS), st.integers(0, 10_000),
       st.booleans(), st.booleans(), st.booleans())
def test_compiled_engine_matches_dense_path(hidden, kind, seed, pin, soft, reluctance):
    # zero_preactivations: some z start at 0 exactly.  Nonzero biases: with zero ones an equilibrium
    # downstream of dead units lies on switching surfaces, where either path may see a late event of
    # round-off size, and the dense path's scan of identically-zero sums needs exponentially many
    # intervals (such networks are tested on the compiled engine alone, below).
    rng = np.random.default_rng(seed)
    net = sl.Network.random([2] + hidden + [1], seed=seed)
    net = sl.Network(net.weights, [rng.normal(0, 0.3, b.shape) for b in net.biases], net.output)
    X = rng.uniform(-2, 2, size=(3, 2))
    kw = dict(pins={"a1[0]": 0.4} if pin else None,
              soft_pins=sl.SoftPins({f"a{len(hidden)}[0]": -0.3}, gamma=3.0) if soft and not (
                  pin and len(hidden) == 1) else None,
              reluctance=1e-3 if reluctance else None)
    init = initial_states(net, X, kind, seed)
    fast = sl.heat(net, X, method="exact", init=init, max_events=500, **kw)
    assert not chatters(fast)
    slow = dense_path(net, X, init=init, max_events=500, **kw)
    # The dense path can chatter (sliding_end / sliding_start at one instant, without end) where
    # sliding ends tangentially: such examples do not compare.
    assume(not chatters(slow))
    assert slow.fallback_samples.size == 3 and fast.fallback_samples.size == 0
    assert_same_flow(fast, slow)


@pytest.mark.parametrize("pinned", [True, False])
def test_zero_preactivations_slide_at_once(pinned):
    # z = 0 at the start with p > 0 and p + a < 0: sliding from t = 0, an episode that opens with a
    # sliding_start event at t = 0, in both paths (the second case is the hostile input).
    net = sl.Network(weights=[np.array([[1.0]]), np.array([[2.0 if pinned else 0.5]])],
                     biases=[np.zeros(1), np.zeros(1)], output="identity")
    init = np.array([[0.0, -2.0, 0.0]] if pinned else [[0.0, -3.0, 0.0]])
    kw = dict(pins={"a1": -2.0}) if pinned else dict(t_max=0.3)
    fast = sl.heat(net, [1.0], method="exact", init=init, **kw)
    slow = dense_path(net, [1.0], init=init, **kw)
    for res in (fast, slow):
        assert list(res.events["kind"]) == ["sliding_start"] and res.events["time"][0] == 0.0
        assert res.sliding_episodes.tolist() == [1] and res.episodes.tolist() == [[0, 1, 0, 0, -1]]
        assert res.final_sliding[0][0, 0] and res.sol(0.3, sample=0)[0] == 0.0
    assert_same_flow(fast, slow)
    table, summary = sl.switch_statistics(fast)
    assert summary["sliding_samples"] == 1


def test_initial_sliding_events_count_towards_max_events():
    net = sl.Network(weights=[np.array([[1.0], [1.0]]), np.array([[0.5, 0.5]])], biases=[np.zeros(2), np.zeros(1)],
                     output="identity")
    init = np.array([[0.0, 0.0, -3.0, -3.0, 0.0]])
    with pytest.warns(RuntimeWarning, match="max_events=1 stopped 1 of 1"):
        fast = sl.heat(net, [1.0], method="exact", init=init, max_events=1)
        slow = dense_path(net, [1.0], init=init, max_events=1)
    for res in (fast, slow):
        assert res.n_events == 2 and res.time[0] == 0.0 and res.stopped_at_max_events.all()
        assert len(res.segments) == 1 and np.allclose(res.state[0], init[0], rtol=0, atol=1e-12)


def test_zero_network_is_integrated():
    # Zero biases and input, z = 0: sums that vanish identically (equal rates cancelling); the compiled
    # engine's Krylov space merges equal eigenvalues, so it has no such sums.
    net = sl.Network.random([2, 3, 3, 1], seed=6658)
    net = sl.Network(net.weights, [np.zeros_like(b) for b in net.biases], net.output)
    X = np.zeros((2, 2))
    init = initial_states(net, X, "zero_preactivations", 6658)
    ex = sl.heat(net, X, method="exact", init=init)
    assert ex.converged and np.abs(ex.output - net.forward(X)).max() < 1e-10
    for e in ex.events:
        zi = ex.layout.free(f"z{e['layer']}").start + e["neuron"]
        assert abs(ex.sol(e["time"], sample=int(e["sample"]))[zi]) < 1e-12


@pytest.mark.parametrize("dims", [[2, 30, 1], [2, 8, 8, 1], [2, 5, 5, 5, 1]])
def test_deep_and_wide_networks_match(dims):
    net = sl.Network.random(dims, seed=1)
    X = np.random.default_rng(1).uniform(-2, 2, size=(4, 2))
    assert_same_flow(sl.heat(net, X, method="exact", seed=2), dense_path(net, X, seed=2))


def test_stops_at_t_max_and_max_events_like_the_dense_path():
    net = sl.Network.random([2, 12, 1], seed=3)
    X = np.random.default_rng(3).uniform(-2, 2, size=(5, 2))
    for kw in (dict(t_max=0.3), dict(max_events=2)):
        stops = "max_events" in kw
        with pytest.warns(RuntimeWarning, match="max_events=2 stopped") if stops else contextlib.nullcontext():
            fast = sl.heat(net, X, method="exact", seed=4, **kw)
            slow = dense_path(net, X, seed=4, **kw)
        assert not fast.converged
        assert fast.stopped_at_max_events.all() == stops and not (fast.stopped_at_max_events & fast.converged_samples).any()
        assert_same_flow(fast, slow)


def dense_representation(field, pins, alpha, state, s, active, sliding):
    """The segment flow from ``state`` by a dense eigendecomposition of ``L_FF`` (the naive twin)."""
    held = np.zeros(field.n, dtype=bool)
    held[pins] = True
    held[field.z_index[sliding]] = True
    D = field.coboundary(active).toarray()
    F = ~held
    lam, Q = np.linalg.eigh(D[:, F].T @ D[:, F])
    star = state.copy()
    star[F] = -Q @ ((Q.T @ (D[:, F].T @ (D[:, held] @ state[held] + field.e[s]))) / lam)
    beta = Q.T @ (state[F] - star[F])

    def states(t):
        out = np.repeat(star[None, :], len(t), axis=0)
        out[:, F] += (np.exp(-alpha * np.outer(t, lam)) * beta) @ Q.T
        return out
    return states


@pytest.mark.parametrize("dims", [[2, 30, 1], [2, 6, 6, 1], [2, 4, 4, 4, 1]])
def test_krylov_bound_holds_and_is_small(dims):
    net = sl.Network.random(dims, seed=5)
    X = np.random.default_rng(5).uniform(-2, 2, size=(3, 2))
    ex = sl.heat(net, X, method="exact", seed=6, alpha=0.7, pins={"a1[0]": 0.2})
    engine = ex.segments[0]._engine
    assert 0 <= ex.krylov_bound < 1e-9
    for i in range(0, len(ex.segments), max(1, len(ex.segments) // 12)):
        sg = ex.segments[i]
        ts = np.array([0.0, 0.1, 1.0, 10.0, 1e3])
        pins = np.flatnonzero(engine.op.held_pin)            # the engine's hard-pin mask
        ref = dense_representation(engine.field, pins, 0.7, sg._state0, sg.sample, sg.active, sg.sliding)(ts)
        err = np.abs(sg.states(sg.start + ts) - ref).max()
        assert err <= sg.krylov_bound + 1e-13 * (1 + np.abs(ref).max())
        assert sg.krylov_bound <= ex.krylov_bound and sg.k <= engine.field.n


def test_bitwise_identical_for_any_thread_count():
    net = sl.Network.random([2, 10, 1], seed=7)
    X = np.random.default_rng(7).uniform(-2, 2, size=(40, 2))
    runs = [sl.heat(net, X, method="exact", seed=8, threads=t) for t in (1, 2, 3)]
    ts = np.linspace(0, 2, 5)
    for r in runs[1:]:
        assert np.array_equal(r.state, runs[0].state) and np.array_equal(r.time, runs[0].time)
        assert np.array_equal(r.events, runs[0].events) and np.array_equal(r.fixed_point, runs[0].fixed_point)
        assert np.array_equal(r.sol(ts), runs[0].sol(ts))
        assert np.array_equal(r.decay_rate, runs[0].decay_rate) and len(r.segments) == len(runs[0].segments)


def test_fallback_samples_match_the_compiled_path():
    # A deep net's segments need many Krylov vectors, a one-layer net's few: a cap in between sends
    # only some samples (or segments' samples) to the dense path, and nothing changes.
    net = sl.Network.random([2, 6, 6, 1], seed=9)
    X = np.random.default_rng(9).uniform(-2, 2, size=(6, 2))
    fast = sl.heat(net, X, method="exact", seed=10)
    k_max = np.array([max(sg.k for sg in fast.segments_of(s)) for s in range(6)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exact_krylov, "KRYLOV_CAP", int(k_max.min()))
        mixed = sl.heat(net, X, method="exact", seed=10)
    assert np.array_equal(mixed.fallback_samples, np.flatnonzero(k_max > k_max.min()))
    assert 0 < mixed.fallback_samples.size < 6
    for s in range(6):
        compiled = {isinstance(sg, exact_krylov.KrylovSegment) for sg in mixed.segments_of(s)}
        assert compiled == {s not in mixed.fallback_samples}
    assert_same_flow(mixed, fast)


def test_record_buffers_grow(monkeypatch):
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(5, 2))
    ref = sl.heat(net, X, method="exact", seed=1)
    monkeypatch.setattr(exact_krylov, "RECORDS_PER_SAMPLE", 1)
    small = sl.heat(net, X, method="exact", seed=1)
    assert len(ref.segments) > 5 * 2 and len(ref.events) > 5 * 2
    assert np.array_equal(small.events, ref.events) and np.array_equal(small.state, ref.state)
    assert np.array_equal(small.segments.starts, ref.segments.starts)


def test_brent_and_convergence_time_against_scipy():
    from scipy.optimize import brentq

    from helpers.naive import convergence_time

    rng = np.random.default_rng(0)
    for _ in range(20):
        k = rng.integers(1, 6)
        mu = rng.uniform(0.1, 5, k)
        C = rng.standard_normal((1, k))
        c = np.array([-C.sum() * rng.uniform(0.2, 0.9)])     # w(0) = c + sum C, w(inf) = c: a sign change
        if (c[0] + C.sum()) * c[0] >= 0:
            continue
        ours = kx.brent(0, 0, c, C, mu, 0.0, 200.0, 1e-300, 4 * np.finfo(float).eps, 200)
        ref = brentq(lambda t: c[0] + C[0] @ np.exp(-mu * t), 0.0, 200.0, xtol=1e-300,
                     rtol=4 * np.finfo(float).eps)
        assert ours == pytest.approx(ref, rel=1e-14)
        beta = rng.standard_normal(k)
        assert kx.convergence_time(beta, mu, 1e-10) == pytest.approx(convergence_time(beta, mu, 1e-10), rel=1e-13)
