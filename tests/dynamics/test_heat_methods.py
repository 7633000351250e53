"""heat's methods: options of one method refused by the other (API and command line), the shared result
base class, train's method, argument checks before any work, the exact flow's memory estimate, and the
block runner of the thread pools."""

import inspect
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg._common.blocks import BlockRunner, map_blocks
from sheaflinalg._common.options import Default
from sheaflinalg.dynamics.heat import METHODS

NET = sl.Network.random([2, 4, 1], seed=0)
GIVEN = dict(dt=0.02, max_steps=10, record_every=1, record_states=[0], output_force="discrepancy", crossings=False,
             max_crossings=5, sliding_window=2, sliding_min_flips=2, check_stability=False, adaptive=False, t_max=1.0, max_events=5,
             cg_tol=1e-8, cg_max_iter=5)


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("other", sorted(METHODS))
def test_an_option_of_the_other_method_is_refused_naming_it(method, other):
    for name in sorted(set(METHODS[other]) - set(METHODS[method])):
        users = " or ".join(f"method='{m}'" for m, names in METHODS.items() if name in names)
        with pytest.raises(ValueError, match=rf"heat\(method='{method}'\) does not use {name} "
                                             rf"\(an option of {users} only\)"):
            sl.heat(NET, [0.5, -1.0], method=method, **{name: GIVEN[name]})


def test_every_method_specific_option_defaults_to_a_readable_sentinel():
    params = inspect.signature(sl.heat).parameters
    for name in METHODS["euler"] + METHODS["exact"] + METHODS["implicit"]:
        assert isinstance(params[name].default, Default)
    assert "dt=<default 0.01>" in str(inspect.signature(sl.heat))


def test_the_default_given_explicitly_is_a_given_option():
    with pytest.raises(ValueError, match="does not use dt"):
        sl.heat(NET, [0.5, -1.0], method="exact", dt=0.01)


def test_unknown_method_lists_the_choices():
    with pytest.raises(ValueError, match="unknown method 'rk4'; expected one of 'euler', 'exact'"):
        sl.heat(NET, [0.5, -1.0], method="rk4")
    X, Y = sl.tasks.paraboloid(10, seed=0)
    with pytest.raises(ValueError, match="unknown method 'rk4'; expected one of 'euler', 'equilibrium'"):
        sl.train(sl.Network.random([2, 3, 1], seed=0), X, Y, steps=10, progress=False, method="rk4")
    with pytest.raises(ValueError, match=r"train\(method='equilibrium'\) does not use steps"):
        sl.train(sl.Network.random([2, 3, 1], seed=0), X, Y, steps=10, progress=False, method="equilibrium")
    fit = sl.train(sl.Network.random([2, 3, 1], seed=0), X, Y, steps=10, epoch_steps=10, progress=False,
                   method="euler")
    assert np.isfinite(fit.history.train_loss[-1])


def test_command_line_refuses_an_option_of_the_other_method(capsys):
    from sheaflinalg.cli import main

    assert main(["heat", "--method", "exact", "--dt", "5", "--no-progress"]) == 2
    assert "heat(method='exact') does not use dt" in capsys.readouterr().err
    assert main(["heat", "--t-max", "1", "--no-progress"]) == 2
    assert "heat(method='euler') does not use t_max" in capsys.readouterr().err


def test_results_share_a_base_and_no_field_changes_meaning():
    eu = sl.heat(NET, [0.5, -1.0], dt=0.05, seed=1, progress=False)
    ex = sl.heat(NET, [0.5, -1.0], method="exact", seed=1)
    assert isinstance(eu, sl.FlowResult) and isinstance(ex, sl.FlowResult) and not isinstance(ex, sl.HeatResult)
    assert (eu.method, ex.method) == ("euler", "exact")
    for euler_only in ("steps", "crossings", "crossings_total", "sliding", "sliding_total", "final_change", "dt"):
        assert hasattr(eu, euler_only) and not hasattr(ex, euler_only)
    assert ex.n_events == len(ex.events) and ex.episodes.shape[1] == 5
    np.testing.assert_allclose(eu.block("a1"), ex.block("a1"), atol=1e-9)


def test_switch_statistics_of_an_euler_result_is_a_clear_error():
    eu = sl.heat(NET, [0.5, -1.0], dt=0.05, seed=1, progress=False)
    with pytest.raises(TypeError, match="needs the result of heat\\(..., method='exact'\\).*method='euler'"):
        sl.switch_statistics(eu)


@pytest.mark.parametrize("kw,match", [(dict(times=()), "times must hold at least one"),
                                      (dict(dts=()), "dts must hold at least one"),
                                      (dict(dts=(0.01, -1.0)), "dts"), (dict(times=5.0), "times must be a sequence"),
                                      (dict(alpha=0.0), "alpha"), (dict(seed=-1), "seed"),
                                      (dict(clamp={"a1": 1.0}), "unexpected keyword")])
def test_convergence_study_checks_every_argument_before_the_exact_run(monkeypatch, kw, match):
    from sheaflinalg.dynamics import study

    monkeypatch.setattr(study, "heat", lambda *a, **k: pytest.fail("ran before the arguments were checked"))
    with pytest.raises((ValueError, TypeError), match=match):
        sl.convergence_study(NET, [[0.5, -1.0]], **kw)


def test_exact_flow_refuses_what_does_not_fit_in_memory_before_any_work(monkeypatch):
    from sheaflinalg._common import memory
    from sheaflinalg.dynamics import problem
    from sheaflinalg.dynamics.exact.flow import memory_estimate

    assert memory_estimate([2, 6000, 6000, 1], 1, 2) > 5 * 2**30     # the issue's [2,6000,6000,1]
    monkeypatch.setattr(memory, "available_bytes", lambda: 4 * 2**30)
    monkeypatch.setattr(problem, "prepare", lambda *a, **k: pytest.fail("work started before the estimate"))
    net = sl.Network(weights=[np.zeros((6000, 2)), np.zeros((6000, 6000)), np.zeros((1, 6000))],
                     biases=[np.zeros(6000), np.zeros(6000), np.zeros(1)], output="identity")
    with pytest.raises(sl.InsufficientMemoryError, match=r"the exact flow of \[2, 6000, 6000, 1\].*method='euler'"):
        sl.heat(net, [0.5, -1.0], method="exact")


def test_memory_estimate_grows_with_the_work():
    from sheaflinalg.dynamics.exact.flow import memory_estimate

    base = memory_estimate([2, 30, 1], 10, 1)
    assert memory_estimate([2, 60, 1], 10, 1) > base and memory_estimate([2, 30, 1], 100, 1) > base
    assert memory_estimate([2, 30, 1], 10, 2) > base


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10**6))
def test_compiled_scan_matches_the_naive_generic_scan(nw, k, seed):
    from helpers.naive import ExponentialSums

    from sheaflinalg.dynamics.exact.dense import DenseSums
    from sheaflinalg.dynamics.exact.expm import first_event

    rng = np.random.default_rng(seed)
    mu = rng.uniform(0.1, 5.0, k)
    C = rng.standard_normal((nw, k))
    c = rng.standard_normal(nw) * 0.5 + np.abs(C).sum(axis=1) * rng.uniform(-0.2, 0.6, nw)
    fast = DenseSums(c, C, mu).first_event(30.0, 0.25 / mu.max())
    slow = first_event(ExponentialSums(c, C, mu), 30.0, 0.25 / mu.max())
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert fast[1] == slow[1] and fast[0] == pytest.approx(slow[0], rel=1e-12, abs=1e-300)


def test_block_runner_keeps_block_order_and_uses_threads():
    names = []

    def work(b):
        names.append(threading.current_thread().name)
        return b * b

    assert map_blocks(work, range(6), threads=1) == [0, 1, 4, 9, 16, 25]
    assert set(names) == {threading.current_thread().name}
    names.clear()
    with BlockRunner(threads=3, n_blocks=6) as runner:
        assert runner.map(work, range(6)) == [0, 1, 4, 9, 16, 25]
        assert runner.map(work, [7]) == [49]          # one block: in the calling thread
    assert threading.current_thread().name not in names[:6]


def test_block_runner_raises_the_error_of_a_block():
    def work(b):
        if b == 2:
            raise ValueError("block 2")
        return b

    with pytest.raises(ValueError, match="block 2"):
        map_blocks(work, range(4), threads=2)


def test_convergence_study_runs_on_its_defaults():
    # the default times are multiples of every default dt (they were not: a call on defaults was refused)
    st = sl.convergence_study(NET, [[0.5, -1.0]])
    assert st.errors.shape == (4, 3) and np.all(st.errors > 0) and 0.7 < st.slope < 1.3
