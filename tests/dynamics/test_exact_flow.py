"""The exact heat flow (heat(method="exact")): closed forms, a naive Euler twin, events, pins, refusals."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sheaflinalg as sl


def one_neuron(w, b1, v, b2):
    return sl.Network(weights=[np.array([[w]]), np.array([[v]])], biases=[np.array([b1]), np.array([b2])],
                      output="identity")


def test_crossing_time_by_hand():
    # a1 pinned to c: z' = alpha (p - z) below 0, alpha (p + c - 2 z) above; from z0 < 0 the crossing is at
    # t* = ln((p - z0) / p) / alpha, and the equilibrium (p + c) / 2.
    net = one_neuron(1.0, 0.5, 1.0, 0.0)
    x, c, z0, alpha = 0.25, 1.0, -1.5, 0.7
    p = x + 0.5
    init = np.array([[z0, c, 0.3]])
    ex = sl.heat(net, [x], alpha=alpha, init=init, pins={"a1": c}, method="exact")
    t_star = np.log((p - z0) / p) / alpha
    assert len(ex.events) == 1 and ex.events["kind"][0] == "crossing_up"
    assert ex.events["time"][0] == pytest.approx(t_star, rel=1e-14)
    assert ex.state[0, 0] == pytest.approx((p + c) / 2, abs=1e-12)
    # z2 is decoupled: z2(t) = v c + b2 + (z2(0) - v c - b2) e^{-alpha t}
    assert ex.sol(2.0, sample=0)[2] == pytest.approx(c + (0.3 - c) * np.exp(-alpha * 2.0), abs=1e-14)


def test_sliding_segment_by_hand():
    # p > 0 pushes z up from below; p + a < 0 pushes it down from above: z reaches 0 and slides there.
    net = one_neuron(1.0, 0.0, 2.0, 0.0)
    x, c, z0, alpha = 1.0, -2.0, -1.0, 1.0
    init = np.array([[z0, c, 0.0]])
    ex = sl.heat(net, [x], alpha=alpha, init=init, pins={"a1": c}, method="exact")
    t_star = np.log((x - z0) / x) / alpha
    assert list(ex.events["kind"]) == ["sliding_start"]
    assert ex.events["time"][0] == pytest.approx(t_star, rel=1e-14)
    for t in (t_star, t_star + 0.5, t_star + 3.0):
        assert ex.sol(t, sample=0)[0] == 0.0
    assert ex.final_sliding[0][0, 0] and ex.sliding_episodes[0] == 1 and ex.converged


def naive_euler(net, x, state, alpha, dt, steps):
    """Forward Euler from the paper's edges (reduced system), mask z >= 0 every step."""
    Ws, bs = net.weights, net.biases
    k = len(Ws) - 1
    sizes = [W.shape[0] for W in Ws]
    pos = np.cumsum([0] + [n for n in sizes[:-1] for _ in (0, 1)] + [sizes[-1]])
    blocks = [state[pos[i]:pos[i + 1]].copy() for i in range(2 * k + 1)]
    z, a = blocks[0::2], blocks[1::2]
    for _ in range(steps):
        prev = [x] + a
        ez = [z[l] - Ws[l] @ prev[l] - bs[l] for l in range(k + 1)]
        R = [(z[l] >= 0).astype(float) for l in range(k)]
        ea = [a[l] - R[l] * z[l] for l in range(k)]
        fz = [-ez[l] + (R[l] * ea[l] if l < k else 0) for l in range(k + 1)]
        fa = [-ea[l] + Ws[l + 1].T @ ez[l + 1] for l in range(k)]
        z = [z[l] + alpha * dt * fz[l] for l in range(k + 1)]
        a = [a[l] + alpha * dt * fa[l] for l in range(k)]
    return np.concatenate([v for pair in zip(z[:-1], a) for v in pair] + [z[-1]])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=2), st.integers(0, 10_000))
def test_matches_naive_fine_euler(hidden, seed):
    net = sl.Network.random([2] + hidden + [1], seed=seed)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, 2)
    ex = sl.heat(net, x, method="exact", seed=seed)
    n = ex.state.shape[1]
    init = sl.heat(net, x, method="exact", seed=seed, t_max=1e-300).sol(0.0, sample=0)
    T, dt = 1.0, 2.5e-4
    naive = naive_euler(net, x, init, 1.0, dt, int(T / dt))
    exact = ex.sol(T, sample=0)
    assert exact.shape == (n,)
    assert np.abs(naive - exact).max() < 5e-3 * (1 + np.abs(exact).max())
    assert np.abs(ex.output - net.forward(x[None])).max() < 1e-9


def test_events_sorted_and_on_the_surface():
    net = sl.Network.random([2, 12, 1], seed=3)
    X = np.random.default_rng(3).uniform(-2, 2, size=(6, 2))
    ex = sl.heat(net, X, method="exact", seed=4)
    ev = ex.events
    assert len(ev) > 10 and np.all(np.diff(ev["time"]) >= 0)
    lay = ex.layout
    for e in ev:
        zi = lay.free(f"z{e['layer']}").start + e["neuron"]
        assert abs(ex.sol(e["time"], sample=int(e["sample"]))[zi]) < 1e-12
    assert ex.switches.sum() == np.isin(ev["kind"], ["crossing_up", "crossing_down"]).sum()


def test_certificate_and_equilibrium():
    net = sl.Network.random([2, 10, 1], seed=5)
    X = np.random.default_rng(5).uniform(-2, 2, size=(4, 2))
    ex = sl.heat(net, X, method="exact", seed=6, tol=1e-13)
    assert ex.converged and np.abs(ex.output - net.forward(X)).max() < 1e-10
    for t in np.linspace(0, 5, 11):
        tt = ex.t_last + t
        dist = np.array([np.linalg.norm(ex.sol(tt[s], sample=s) - ex.fixed_point[s]) for s in range(4)])
        assert np.all(dist <= ex.certificate(tt) * (1 + 1e-9) + 1e-15)
    assert np.all(ex.decay_rate > 0)


def test_pattern_cache_hits_identical():
    net = sl.Network.random([2, 8, 1], seed=7)
    x = np.array([0.3, -1.2])
    init = np.random.default_rng(0).standard_normal((1, 17))
    ex = sl.heat(net, np.stack([x, x]), init=np.vstack([init, init]), method="exact")
    assert ex.cache_hits >= len(ex.segments) // 2
    assert np.array_equal(ex.state[0], ex.state[1])
    e0, e1 = ex.events[ex.events["sample"] == 0], ex.events[ex.events["sample"] == 1]
    assert np.array_equal(e0["time"], e1["time"]) and np.array_equal(e0["kind"], e1["kind"])
    t = np.linspace(0, ex.time[0], 7)
    assert np.array_equal(ex.sol(t, sample=0), ex.sol(t, sample=1))


def test_pins_and_soft_pins_reach_completion():
    net = sl.Network.random([2, 6, 1], seed=8)
    X = np.random.default_rng(8).uniform(-2, 2, size=(3, 2))
    soft = sl.SoftPins({"a1[1]": 0.4}, gamma=5.0)
    ex = sl.heat(net, X, method="exact", seed=9, pins={"a1[0]": 0.7}, soft_pins=soft, reluctance=1e-3)
    assert ex.converged
    # Pinned sheaves can have several equilibria: compare with the completion in the flow's final region.
    c = sl.complete(net, X, pins={"a1[0]": 0.7}, soft_pins=soft, reluctance=1e-3, pattern=ex.final_pattern)
    assert c.settled and np.abs(ex.state - c.state).max() < 1e-9
    assert np.all(ex.state[:, ex.layout.free("a1").start] == 0.7)


def test_output_pin_uses_unreduced_system():
    net = sl.Network.random([2, 5, 1], seed=10)
    ex = sl.heat(net, [[0.2, 0.9]], method="exact", seed=1, pins={"yhat": 1.5})
    # The flow ends sliding on z1[j] = 0 for some j: the completion holds those at 0 as well.
    held = {f"z1[{j}]": 0.0 for j in np.flatnonzero(ex.final_sliding[0][0])}
    assert ex.sliding_episodes[0] > 0 and held
    c = sl.complete(net, [[0.2, 0.9]], pins={"yhat": 1.5, **held}, pattern=ex.final_pattern)
    assert not ex.layout.reduced and ex.converged and c.settled
    assert np.abs(ex.state - c.state).max() < 1e-9


@pytest.mark.parametrize("output", ["sigmoid", "tanh", "softmax"])
def test_refuses_nonlinear_output(output):
    net = sl.Network.random([2, 3, 2 if output == "softmax" else 1], seed=0, output=output)
    with pytest.raises(ValueError, match="method='exact'.*identity output"):
        sl.heat(net, [0.1, 0.2], method="exact")


def test_refuses_bad_options():
    net = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises(ValueError, match="method"):
        sl.heat(net, [0.1, 0.2], method="rk4")
    with pytest.raises(ValueError, match="t_max"):
        sl.heat(net, [0.1, 0.2], method="exact", t_max=-1.0)
    ex = sl.heat(net, [0.1, 0.2], method="exact", seed=1, t_max=0.05)
    with pytest.raises(ValueError, match="beyond its end"):
        ex.sol(1.0)
    with pytest.raises(ValueError, match="sample"):
        ex.sol(0.01, sample=3)


def test_euler_kernel_converges_at_first_order():
    net = sl.Network.random([2, 6, 1], seed=11)
    st_ = sl.convergence_study(net, [[0.4, -0.8], [-1.0, 1.5]], dts=(0.004, 0.002, 0.001), times=(0.2, 0.6))
    assert 0.85 < st_.slope < 1.3
    ratios = st_.errors[:-1].max(axis=1) / st_.errors[1:].max(axis=1)
    assert np.all((ratios > 1.6) & (ratios < 2.6))
    assert "slope" in st_.table()


def test_switch_statistics_table():
    net = sl.Network.random([2, 10, 1], seed=12)
    ex = sl.heat(net, np.random.default_rng(12).uniform(-2, 2, (8, 2)), method="exact", seed=1)
    table, summary = sl.switch_statistics(ex)
    assert summary["samples"] == 8 and summary["max_switches"] == ex.switches.max()
    assert "sliding episodes" in table


def test_command_line_exact(tmp_path, capsys):
    from sheaflinalg.cli import main

    path = tmp_path / "h.npz"
    assert main(["heat", "--method", "exact", "--arch", "2,6,1", "--samples", "3", "--no-progress",
                 "--save-history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "exact flow" in out and "events" in out
    with np.load(path, allow_pickle=False) as f:
        assert f["time"].shape == (3,) and np.all(np.diff(f["event_time"]) >= 0)


def test_command_line_refuses_nonlinear_exact(capsys):
    from sheaflinalg.cli import main

    assert main(["heat", "--method", "exact", "--output", "sigmoid", "--no-progress"]) != 0
    assert "method='exact'" in capsys.readouterr().err


def test_exact_figures(tmp_path):
    from sheaflinalg.plotting.exact import plot_exact_convergence, plot_exact_phase_plane

    net = sl.Network.random([2, 5, 1], seed=10)
    ex = sl.heat(net, [[0.2, 0.9]], method="exact", seed=1, pins={"yhat": 1.5})
    plot_exact_phase_plane(ex, neurons=(1, 2), path=tmp_path / "pp.png")
    plot_exact_convergence(ex, path=tmp_path / "cv.png")
    assert (tmp_path / "pp.png").stat().st_size > 1000 and (tmp_path / "cv.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="neurons"):
        plot_exact_phase_plane(ex, neurons=(1, 1))


def test_sliding_matches_euler_chattering_limit():
    # Euler chatters around a sliding surface; its error against the Filippov solution still shrinks with dt.
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(20, 2))
    ex = sl.heat(net, X, method="exact", seed=1)
    ev = ex.events
    s = int(ev["sample"][ev["kind"] == "sliding_start"][0])
    start = ev["time"][(ev["kind"] == "sliding_start") & (ev["sample"] == s)][0]
    ex1 = sl.heat(net, X[s:s + 1], method="exact", init=ex.sol(0.0, sample=s)[None, :])
    T = float(np.ceil((start + 0.5) * 100) / 100)
    errs = []
    for dt in (2e-3, 1e-3, 5e-4):
        eu = sl.heat(net, X[s:s + 1], dt=dt, max_steps=int(round(T / dt)), tol=0.0, init=ex1.sol(0.0),
                     progress=False)
        errs.append(np.abs(eu.state[0] - ex1.sol(T, sample=0)).max())
    assert errs[0] > errs[1] > errs[2] and errs[2] < 2e-3
    assert ex1.sliding_episodes[0] >= 1


def test_cancelling_terms_of_a_repeated_rate_are_no_event_and_no_endless_search():
    import time

    from helpers.naive import ExponentialSums

    from sheaflinalg.dynamics.exact.dense import DenseSums
    from sheaflinalg.dynamics.exact.expm import first_event

    # w(t) = 0.55 e^{-t} - 0.55 e^{-t} (a repeated eigenvalue), and a quantity that really crosses
    c, C, mu = np.array([0.0, -0.5]), np.array([[0.55, -0.55, 0.0], [0.0, 0.0, 1.0]]), np.array([1.0, 1.0 + 1e-16, 2.0])
    for sums in (ExponentialSums(c, C, mu), DenseSums(c, C, mu)):     # the generic scan, the compiled one
        start = time.perf_counter()
        t, row = sums.first_event(50.0, 0.1) if isinstance(sums, DenseSums) else first_event(sums, 50.0, 0.1)
        assert time.perf_counter() - start < 5.0
        assert row == 1 and abs(t - np.log(2.0) / 2.0) < 1e-14
    args = np.array([0.0]), np.array([[0.55, -0.55]]), np.array([1.0, 1.0])
    assert first_event(ExponentialSums(*args), 50.0, 0.1) is None
    assert DenseSums(*args).first_event(50.0, 0.1) is None
