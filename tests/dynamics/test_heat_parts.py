"""A batch run in parts gives the result of one run (same stopping step, states, logs), and the
threads that share the parts change nothing, bit for bit."""

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.dynamics.euler import parts as heat_parts


def run(parts, threads=None, **kw):
    """``sl.heat`` with the batch cut into ``parts`` parts (1: one run) and ``threads`` threads."""
    net = kw.pop("net")
    X = kw.pop("X")
    mp = pytest.MonkeyPatch()
    mp.setattr(heat_parts, "MIN_SAMPLES_PER_PART", max(1, X.shape[0] // parts))
    try:
        assert heat_parts.part_count(X.shape[0]) == parts
        return sl.heat(net, X, progress=False, threads=threads or parts, **kw)
    finally:
        mp.undo()


def assert_same_run(a, b):
    assert (a.steps, a.converged, a.crossings_total) == (b.steps, b.converged, b.crossings_total)
    np.testing.assert_array_equal(a.state, b.state)
    np.testing.assert_array_equal(a.edge_discrepancy, b.edge_discrepancy)
    np.testing.assert_array_equal(a.discord, b.discord)
    assert a.final_change == b.final_change
    np.testing.assert_array_equal(a.crossings, b.crossings)
    np.testing.assert_array_equal(a.sliding, b.sliding)
    if a.history is None:
        assert b.history is None
        return
    ha, hb = a.history, b.history
    np.testing.assert_array_equal(ha.steps, hb.steps)
    np.testing.assert_array_equal(ha.sample_discord, hb.sample_discord)
    np.testing.assert_array_equal(ha.output, hb.output)
    np.testing.assert_array_equal(ha.states, hb.states)
    # Batch totals are sums over the parts: equal up to the order of the sum.
    np.testing.assert_allclose(ha.discord, hb.discord, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("parts", [2, 3])
def test_parts_converge_at_the_step_of_one_run_with_the_same_records(parts):
    net = sl.Network.random([2, 6, 4, 1], seed=4, output="sigmoid")
    X = np.random.default_rng(0).uniform(-2, 2, size=(150, 2))
    kw = dict(net=net, X=X, dt=0.05, tol=1e-9, max_steps=20_000, seed=2, record_every=37,
              record_states=[0, 60, 149, 75])
    one = run(1, **kw)
    assert one.converged and one.crossings_total > 0 and len(one.sliding) > 0
    assert_same_run(one, run(parts, **kw))


def test_parts_reach_max_steps_and_truncate_the_crossing_log_like_one_run():
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(1).uniform(-2, 2, size=(97, 2))
    kw = dict(net=net, X=X, dt=0.01, tol=0.0, max_steps=700, seed=1, max_crossings=60)
    one = run(1, **kw)
    assert not one.converged and one.steps == 700 and one.crossings_total > 60 == len(one.crossings)
    assert_same_run(one, run(2, **kw))


def test_parts_with_hard_and_soft_pins_and_reluctance():
    net = sl.Network.random([3, 8, 5, 1], seed=5)
    M = 80
    X = np.random.default_rng(2).uniform(-1, 1, size=(M, 3))
    # A pinned activation keeps some coordinates sliding on the boundary: a max_steps run.
    kw = dict(net=net, X=X, dt=0.02, tol=1e-10, max_steps=3000, seed=3, pins={"a1[2]": 0.3},
              soft_pins=sl.SoftPins({"a2[0]": 0.5}, gamma=2.0), reluctance=0.01, record_every=500)
    one = run(1, **kw)
    assert one.crossings_total > 0
    assert_same_run(one, run(2, **kw))


def test_a_non_finite_part_is_reported_at_the_first_non_finite_step_of_the_batch():
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(1).uniform(-2, 2, size=(64, 2))
    X[40:] *= 50.0                     # the second part blows up first
    kw = dict(net=net, X=X, dt=1.0, tol=0.0, max_steps=10_000, seed=1, check_stability=False)
    messages = []
    for parts in (1, 2):
        with pytest.raises(sl.NonFiniteStateError) as err:
            run(parts, **kw)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_part_count_depends_on_the_batch_size_only():
    assert heat_parts.part_count(127) == 1
    assert heat_parts.part_count(256) == 2
    assert heat_parts.part_count(300) == 2
    assert heat_parts.part_count(10**6) == heat_parts.MAX_PARTS


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_any_thread_count_gives_the_one_thread_result_bit_for_bit(threads):
    net = sl.Network.random([2, 6, 4, 1], seed=4, output="sigmoid")
    X = np.random.default_rng(0).uniform(-2, 2, size=(400, 2))   # three parts
    kw = dict(dt=0.05, tol=1e-9, max_steps=20_000, seed=2, record_every=37, record_states=[0, 160, 399],
              progress=False)
    one = sl.heat(net, X, threads=1, **kw)
    other = sl.heat(net, X, threads=threads, **kw)
    assert_same_run(one, other)
    np.testing.assert_array_equal(one.history.discord, other.history.discord)


def test_threads_are_validated():
    net = sl.Network.random([2, 4, 1], seed=0)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises((TypeError, ValueError), match="threads"):
            sl.heat(net, np.ones((2, 2)), threads=bad, progress=False)


def test_record_buffers_grow_with_the_run_not_with_max_steps():
    net = sl.Network.random([2, 4, 1], seed=0)
    res = sl.heat(net, np.ones((3, 2)), max_steps=10**8, record_every=1, tol=1e-10, seed=0, progress=False)
    assert res.converged and res.steps < 10_000
    assert len(res.history.steps) == res.steps + 1


def test_memory_of_crossing_logs_and_growing_histories_is_estimated(monkeypatch):
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(MemoryError, match="max_crossings"):
        sl.heat(net, [0.5, -1.0], max_crossings=2**40, progress=False)
    from sheaflinalg._common import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 200_000)      # a history of ~2000 records
    with pytest.raises(MemoryError, match="record_every"):
        sl.heat(net, np.ones((3, 2)), tol=0.0, max_steps=10**7, record_every=1, max_crossings=100,
                progress=False)
