"""The expm_multiply path of the exact heat flow (large N) against the dense path, its derivative bounds,
reproducibility, and the max_events warning."""

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.dynamics.exact.affine import AffineField
from sheaflinalg.dynamics.exact.dense import Segment
from sheaflinalg.dynamics.exact.expm import ExpmSegment, ExpmSums, Flow

regions = importlib.import_module("sheaflinalg.dynamics.exact.regions")
exact_krylov = importlib.import_module("sheaflinalg.dynamics.exact.krylov")


@pytest.fixture(autouse=True)
def python_path_only(monkeypatch):
    """Every sample on the Python path (the compiled Krylov engine has its own tests)."""
    monkeypatch.setattr(exact_krylov, "KRYLOV_CAP", 0)


def both_paths(monkeypatch, net, X, **kw):
    monkeypatch.setattr(regions, "DENSE_MAX_N", 10**9)
    dense = sl.heat(net, X, method="exact", **kw)
    monkeypatch.setattr(regions, "DENSE_MAX_N", 0)
    expm = sl.heat(net, X, method="exact", **kw)
    assert all(isinstance(sg, Segment) for sg in dense.segments)
    assert all(isinstance(sg, ExpmSegment) for sg in expm.segments)
    return dense, expm


CASES = [
    ([2, 12, 1], 4, {}),
    ([2, 5, 4, 1], 3, {}),
    ([2, 6, 1], 3, dict(pins={"a1[0]": 0.7}, soft_pins=sl.SoftPins({"a1[1]": 0.4}, gamma=5.0), reluctance=1e-3)),
    ([2, 5, 1], 1, dict(pins={"yhat": 1.5})),          # ends sliding (Filippov)
]


@pytest.mark.parametrize("dims,M,kw", CASES)
def test_expm_path_matches_dense_path(monkeypatch, dims, M, kw):
    seed = 10 if "pins" in kw and "yhat" in kw["pins"] else 3
    net = sl.Network.random(dims, seed=seed)
    X = np.random.default_rng(seed).uniform(-2, 2, size=(M, 2)) if M > 1 else np.array([[0.2, 0.9]])
    dense, expm = both_paths(monkeypatch, net, X, seed=1 if M == 1 else 4, **kw)
    d, e = dense.events, expm.events
    assert len(d) > 0 and len(d) == len(e)
    for name in ("sample", "layer", "neuron", "kind", "active"):
        assert np.array_equal(d[name], e[name]), name
    # Measured: event times agree to 2.5e-13 relative, states to 3e-14 (both round-off of their method).
    assert np.max(np.abs(d["time"] - e["time"]) / d["time"]) < 1e-11
    assert np.abs(dense.state - expm.state).max() < 1e-11
    assert np.abs(dense.time - expm.time).max() < 1e-9 * dense.time.max()
    assert np.allclose(dense.decay_rate, expm.decay_rate, rtol=1e-10)
    assert np.array_equal(dense.converged_samples, expm.converged_samples)
    t = np.linspace(0.0, dense.time.min(), 9)
    assert np.abs(dense.sol(t) - expm.sol(t)).max() < 1e-11
    for ev in e:                 # the switching coordinate is on the surface at the event
        zi = expm.layout.free(f"z{ev['layer']}").start + ev["neuron"]
        assert abs(expm.sol(ev["time"], sample=int(ev["sample"]))[zi]) < 1e-12


def test_states_without_a_region(monkeypatch):
    net = sl.Network.random([2, 8, 1], seed=2)
    X = np.random.default_rng(2).uniform(-2, 2, size=(2, 2))
    dense, expm = both_paths(monkeypatch, net, X, seed=5)
    for res in (dense, expm):
        for sg in res.segments[:6]:
            ts = np.linspace(sg.start, sg.end, 5)[::-1]           # any order
            S = sg.states(ts)
            assert S.shape == (5, res.state.shape[1])
            region = res.cache.by_key(sg.key, sg.active, sg.sliding)
            assert np.array_equal(S, sg.state(region, ts))
            assert np.abs(S - res.sol(ts, sample=sg.sample).T).max() < 1e-12


def test_expm_path_is_reproducible_and_leaves_the_global_generator_alone(monkeypatch):
    monkeypatch.setattr(regions, "DENSE_MAX_N", 0)
    net = sl.Network.random([2, 10, 1], seed=6)
    X = np.random.default_rng(6).uniform(-2, 2, size=(2, 2))
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = sl.heat(net, X, method="exact", seed=2)
    assert np.array_equal(np.random.get_state()[1], before)
    b = sl.heat(net, X, method="exact", seed=2)
    assert np.array_equal(a.state, b.state) and np.array_equal(a.events["time"], b.events["time"])


def random_region(seed):
    """A real SparseRegion: random network, pattern, sliding set and pins; random r0 and constants."""
    rng = np.random.default_rng(seed)
    dims = [2] + list(rng.integers(2, 6, size=rng.integers(1, 3))) + [1]
    net = sl.Network.random(dims, seed=seed)
    field = AffineField(net, rng.uniform(-2, 2, (1, 2)), True, type("NoSoft", (), {"size": 0})(), 0.0)
    k = field.z_index.size
    sliding = rng.random(k) < 0.3
    active = (rng.random(k) < 0.5) & ~sliding
    pins = rng.choice(field.a_index, size=rng.integers(0, 2), replace=False)
    region = regions.SparseRegion(field, active, sliding, pins)
    r0 = rng.standard_normal(region.free.size) * rng.uniform(0.1, 3.0)
    c = rng.standard_normal(region.unit.size) * 2.0
    return region, r0, c, rng


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 100_000), st.floats(0.2, 3.0))
def test_expm_bounds_hold_on_a_fine_grid(seed, alpha):
    region, r0, c, rng = random_region(seed)
    f = ExpmSums(c, Flow(region, alpha, r0))
    L = region.apply(np.eye(region.free.size))
    lam, Q = np.linalg.eigh(L)
    A = region.A_free.toarray()
    beta = Q.T @ r0

    def exact(t, k):                     # k-th derivative of w at times t, from the eigendecomposition
        E = (-alpha * lam[:, None]) ** k * np.exp(-alpha * np.outer(lam, t))
        return (0 if k else c[:, None]) + (A @ Q) @ (E * beta[:, None])

    a = rng.uniform(0.0, 2.0) / (alpha * lam.max())
    span = rng.uniform(0.5, 20.0) / (alpha * lam.min())
    grid = a + np.linspace(0.0, 0.05 * span, 17)
    w, dw, b1, b2 = f.values(grid)
    assert np.allclose(w, exact(grid, 0), rtol=1e-11, atol=1e-11)
    assert np.allclose(dw, exact(grid, 1), rtol=1e-10, atol=1e-11)
    fine = a + np.linspace(0.0, span, 2001)
    d1, d2 = np.abs(exact(fine, 1)), np.abs(exact(fine, 2))
    assert np.all(d1 <= b1[:, :1] * (1 + 1e-12) + 1e-14)       # bounds at the left end hold for all t >= a
    assert np.all(d2 <= b2[:, :1] * (1 + 1e-12) + 1e-14)
    for T in (a, a + 0.1 * span, a + span):
        if f.never_again(T):
            assert np.all(exact(T + np.linspace(0.0, 10 * span, 2001), 0) >= -1e-12)


def test_max_events_warns_and_marks_the_samples():
    net = sl.Network.random([2, 12, 1], seed=3)
    X = np.random.default_rng(3).uniform(-2, 2, size=(6, 2))
    full = sl.heat(net, X, method="exact", seed=4)
    counts = np.bincount(full.events["sample"], minlength=6)
    cap = int(np.sort(counts)[3])                   # some samples have more events than this, some not
    expected = counts >= cap
    assert 0 < expected.sum() < 6
    with pytest.warns(RuntimeWarning, match=rf"max_events={cap} stopped {expected.sum()} of 6 samples"):
        res = sl.heat(net, X, method="exact", seed=4, max_events=cap)
    assert np.array_equal(res.stopped_at_max_events, expected)
    assert not res.converged_samples[expected].any()
    assert not full.stopped_at_max_events.any()
