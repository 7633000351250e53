"""Threads: the package's thread policy, bitwise-equal results for any thread count, process-pool
workers on one thread, Ctrl-C in long compiled loops, and runs in parallel Python threads."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg._common import threads as policy


def _in_threads(fns):
    results = [None] * len(fns)

    def call(i):
        results[i] = fns[i]()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_heat_runs_in_threads_equal_sequential_runs():
    net = sl.Network.random([2, 12, 8, 1], seed=0, output="sigmoid")
    X = np.random.default_rng(0).uniform(-2, 2, size=(40, 2))
    halves = (X[:20], X[20:])
    run = [lambda h=h: sl.heat(net, h, seed=1, max_steps=3000, record_every=100, progress=False) for h in halves]
    sequential = [f() for f in run]
    parallel = _in_threads(run)
    for a, b in zip(sequential, parallel):
        np.testing.assert_array_equal(a.state, b.state)
        np.testing.assert_array_equal(a.crossings, b.crossings)
        assert a.steps == b.steps


def test_training_runs_in_threads_equal_sequential_runs():
    X, Y = sl.tasks.paraboloid(50, seed=0)
    nets = [sl.Network.random([2, 10, 1], seed=s) for s in (1, 2)]
    run = [lambda n=n: sl.train(n, X, Y, steps=2000, seed=0, progress=False) for n in nets]
    run += [lambda n=n: sl.sgd(n, X, Y, epochs=2000, progress=False) for n in nets]
    sequential = [f() for f in run]
    parallel = _in_threads(run)
    for a, b in zip(sequential, parallel):
        np.testing.assert_array_equal(a.network.parameters(), b.network.parameters())
        assert a.history.train_loss == b.history.train_loss


# ------------------------------------------------------------ thread policy


def _python(code, env=None, timeout=300):
    """Run ``code`` in a fresh interpreter; returns its stdout (fails on a non-zero exit)."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})), timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_set_num_threads_and_the_context_manager():
    default = sl.get_num_threads()
    assert default == policy.default_num_threads() >= 1
    try:
        sl.set_num_threads(5)
        assert sl.get_num_threads() == 5
        with sl.num_threads(3):
            assert sl.get_num_threads() == 3
            seen = []
            worker = threading.Thread(target=lambda: seen.append(sl.get_num_threads()))
            worker.start()
            worker.join()
            assert seen == [5]          # the context manager is the calling thread's
        assert sl.get_num_threads() == 5
    finally:
        sl.set_num_threads(None)
    assert sl.get_num_threads() == default
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises((TypeError, ValueError), match="must be (a positive |an )?integer"):
            sl.set_num_threads(bad)
        with pytest.raises((TypeError, ValueError), match="must be (a positive |an )?integer"):
            with sl.num_threads(bad):
                pass


def test_the_environment_lowers_the_default():
    code = "import sheaflinalg as sl; print(sl.get_num_threads())"
    cores = policy.available_cores()
    assert int(_python(code, {"SHEAFLINALG_NUM_THREADS": "1"})) == 1
    assert int(_python(code, {"SHEAFLINALG_NUM_THREADS": "64"})) == cores
    assert int(_python(code, {"SHEAFLINALG_NUM_THREADS": "", "NUMBA_NUM_THREADS": "1"})) == 1
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, SHEAFLINALG_NUM_THREADS="two"))
    assert bad.returncode != 0 and "SHEAFLINALG_NUM_THREADS" in bad.stderr


def _worker_threads_seen(_):
    """Kernel and BLAS threads of the calling process."""
    from threadpoolctl import threadpool_info

    blas = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    return sl.get_num_threads(), blas


def test_process_pool_workers_run_one_thread_each():
    with policy.process_pool(2) as pool:
        for kernels, blas in pool.map(_worker_threads_seen, range(2)):
            assert kernels == 1 and blas and all(n == 1 for n in blas)


def test_results_are_bitwise_equal_for_1_to_8_threads_with_more_threads_than_cores():
    # numba's pool has 8 threads here whatever the machine has: 3, 4 and 8 threads really run
    code = """
        import numba, numpy as np, sheaflinalg as sl
        from sheaflinalg.kernels import substitution as sub
        from sheaflinalg.spectral import CoboundaryOperator
        assert numba.config.NUMBA_NUM_THREADS == 8
        net = sl.Network.random([3, 40, 36, 28, 2], seed=3)
        X = np.random.default_rng(0).uniform(-2, 2, size=(300, 3))
        masks = [m[0] for m in net.activation_pattern(X[:1])]
        op = CoboundaryOperator(net, masks)
        op.block_entries = 16                       # every matrix in 8 row blocks
        rng = np.random.default_rng(1)
        v, w = rng.standard_normal(op.n), rng.standard_normal(op.n)
        out = {}
        for t in (1, 2, 3, 4, 8):
            numba.set_num_threads(t)
            Lv, y, Linv = np.empty(op.n), np.empty(op.n), np.empty(op.n)
            P, Q = op._partials()
            kern = sub.backward_sweep if t == 1 else sub.backward_sweep_parallel
            kern(*op._args(), v, Lv, np.empty(op.n), w, y, P, Q, op.block_entries)
            (sub.forward_sweep if t == 1 else sub.forward_sweep_parallel)(*op._args(), y, Linv, op.block_entries)
            big = sl.Network.random([3, 300, 260, 2], seed=1)
            sp = sl.spectrum(big, X[:2], k=2, method="arpack", threads=t, progress=False)
            dense = sl.spectrum(net, X[:120], k=2, method="dense", threads=t, progress=False)
            heat = sl.heat(net, X, seed=0, max_steps=3000, record_every=100, threads=t, progress=False)
            out[t] = [Lv, Linv, sp.smallest, sp.largest, sp.vectors_smallest, dense.smallest,
                      dense.vectors_largest, heat.state, heat.history.discord]
        for t in (2, 3, 4, 8):
            for a, b in zip(out[1], out[t]):
                assert np.array_equal(a, b), t
        print("ok")
    """
    assert _python(code, {"NUMBA_NUM_THREADS": "8"}).strip() == "ok"


@pytest.mark.parametrize("call", [
    "sl.heat(sl.Network.random([2, 4, 1], seed=0), [0.5, -1.0], tol=0.0, max_steps=10**9, progress=False)",
    "sl.train(sl.Network.random([2, 8, 1], seed=0), *sl.tasks.paraboloid(50, seed=0), steps=10**9, "
    "epoch_steps=10**9, progress=False)",
    "sl.heat(sl.Network.random([2, 30, 1], seed=0), np.random.default_rng(0).uniform(-2, 2, (20000, 2)), "
    "method='exact', seed=1)",
])
def test_ctrl_c_stops_a_long_compiled_loop(call):
    code = f"""
        import sys, time, numpy as np, sheaflinalg as sl
        sl.heat(sl.Network.random([2, 4, 1], seed=0), [0.5, -1.0], max_steps=10, progress=False)  # compile
        sl.heat(sl.Network.random([2, 4, 1], seed=0), [0.5, -1.0], method="exact")
        print("started", flush=True)
        try:
            {call}
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
        sys.exit(3)
    """
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "started"
        time.sleep(1.5)
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = child.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        child.kill()
    assert child.returncode == 0 and "interrupted" in out, err
    assert waited < 5.0


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_load_probe_lowers_threads_to_the_cores_other_work_leaves():
    readings = iter([1, 3, 3, 3, 3, 3])
    clock = _Clock()
    probe = policy.LoadProbe(interval=0.01, memory=2, read=lambda: next(readings), clock=clock)
    assert probe.usable(8, cores=4) == 4            # only the caller runs
    clock.now = 0.011
    assert probe.usable(8, cores=4) == 4            # two others for one reading: a blip, not load
    clock.now = 0.022
    assert probe.usable(8, cores=4) == 2            # they stay: two cores left
    assert probe.usable(8, own=2, cores=4) == 2     # no new reading within the interval
    clock.now = 0.033
    assert probe.usable(8, own=2, cores=4) == 4     # two of them are the caller's: less load counts at once
    assert probe.usable(1, cores=4) == 1 and probe.usable(8, cores=2) == 2
    clock.now = 0.044
    probe.usable(8, cores=2)
    clock.now = 0.055
    assert probe.usable(8, cores=2) == 1            # two others for two readings: never fewer than one thread


def test_load_probe_forgets_stale_readings_and_trusts_nothing_unknown():
    values = {"v": 5}
    clock = _Clock()
    probe = policy.LoadProbe(interval=0.01, memory=3, read=lambda: values["v"], clock=clock)
    assert probe.usable(4, cores=4) == 1
    values["v"], clock.now = 1, 1.0                 # long after: the old reading is forgotten
    assert probe.usable(4, cores=4) == 4
    values["v"], clock.now = None, 2.0              # unreadable: nothing is lowered
    assert probe.usable(3, cores=4) == 3
    assert policy._runnable_tasks() is None or policy._runnable_tasks() >= 1


def test_helpers_of_a_parallel_call_that_just_ended_are_not_other_work(monkeypatch):
    monkeypatch.setattr(policy, "_LOAD", policy.LoadProbe(interval=0.0, memory=1, read=lambda: 3))
    monkeypatch.setattr(policy, "available_cores", lambda: 3)
    monkeypatch.setattr(policy, "_last_parallel", (float("-inf"), 1))
    assert policy.usable_threads(3) == 1            # two other runnable tasks
    policy.parallel_done(3)                         # ... which are this call's two helpers
    assert policy.usable_threads(3) == 3


def test_spectrum_kernels_run_serially_while_the_machine_is_full(monkeypatch):
    from sheaflinalg.kernels import substitution as sub
    from sheaflinalg.spectral import CoboundaryOperator

    net = sl.Network.random([3, 40, 36, 2], seed=3)
    masks = [m[0] for m in net.activation_pattern(np.ones((1, 3)))]
    calls = []
    for name in ("backward_sweep_parallel", "forward_sweep_parallel"):
        kernel = getattr(sub, name)
        monkeypatch.setattr(sub, name, lambda *a, _k=kernel: calls.append(1) or _k(*a))
    rng = np.random.default_rng(0)
    v = rng.standard_normal(sum(net.dims[1:-1]) * 2 + net.dims[-1])
    results = {}
    for runnable in (1, 64):                        # idle, then 63 other runnable tasks
        monkeypatch.setattr(policy, "_LOAD", policy.LoadProbe(interval=0.0, memory=1, read=lambda r=runnable: r))
        monkeypatch.setattr(policy, "_last_parallel", (float("-inf"), 1))
        monkeypatch.setattr(policy, "available_cores", lambda: 2)
        op = CoboundaryOperator(net, masks, threads=2)
        op.block_entries = 16
        calls.clear()
        results[runnable] = [op.laplacian_matvec(v[:op.n]) for _ in range(6)]
        assert (len(calls) > 0) == (runnable == 1)
    for a, b in zip(results[1], results[64]):
        assert np.array_equal(a, b)


# ------------------------------------------------- training and harmonic extension on tiles / blocks

_FORCED_PARALLEL = """
    import numba, numpy as np, sheaflinalg as sl
    from sheaflinalg._common import threads as policy
    from sheaflinalg.sheaf import harmonic
    from sheaflinalg.training.euler import tiled
    # Every choice parallel, so that t threads really share the tiles; the kernel records its threads.
    policy.SerialOrParallel.choose = lambda self: True
    policy.SerialOrParallel.prefers_parallel = lambda self: True
    policy.usable_threads = lambda threads: threads      # whatever else the machine runs now
    seen, workers = [], []
    kernel = tiled.tiled_steps_parallel
    def spy(*args):
        seen.append(numba.get_num_threads())
        return kernel(*args)
    tiled.tiled_steps_parallel = spy
    from sheaflinalg._common import blocks          # the block runner's pool (harmonic extension's blocks)
    Pool = blocks.ThreadPoolExecutor
    def pool(max_workers):
        workers.append(max_workers)
        return Pool(max_workers=max_workers)
    blocks.ThreadPoolExecutor = pool
"""


def test_training_and_harmonic_extension_are_bitwise_equal_for_1_to_8_threads():
    # numba's pool has 8 threads whatever the machine has: training batches of 1, 2 and 3 tiles (the
    # last ragged) and tiles that call BLAS; harmonic extensions of 1 and 4 (ragged) blocks.
    code = _FORCED_PARALLEL + """
    from sheaflinalg.kernels.training import train_tiles
    assert numba.config.NUMBA_NUM_THREADS == 8
    net = sl.Network.random([2, 8, 1], seed=4, output="sigmoid")
    wide = sl.Network.random([2, 100, 100, 1], seed=1)
    for M in (300, 13000, 20000):
        X, Y = sl.tasks.circular(M, seed=M)
        bounds = train_tiles(np.array(net.dims), 18, M)[0]
        assert len(bounds) - 1 == {300: 1, 13000: 2, 20000: 3}[M]
        assert M == 300 or bounds[-1] - bounds[-2] < bounds[1]            # the last tile ragged
        out = {}
        for t in (1, 2, 3, 4, 8):
            del seen[:]
            fit = sl.train(net, X, Y, steps=120, epoch_steps=40, seed=0, stagnation=False, progress=False,
                           threads=t)
            out[t] = (fit.network.parameters(), fit.state, fit.history.train_loss, fit.history.discord)
            if len(bounds) > 2 and t > 1:
                assert seen and set(seen) == {t}, (M, t, seen)
            else:
                assert not seen, (M, t, seen)
        for t in (2, 3, 4, 8):
            for a, b in zip(out[1], out[t]):
                assert np.array_equal(a, b), (M, t)
    # Tiles whose layer products go to BLAS (one BLAS thread, as train's default).
    X, Y = sl.tasks.paraboloid(700, seed=1)
    bounds, _, blas = train_tiles(np.array(wide.dims), 402, 700)
    assert blas and len(bounds) == 3
    out = {}
    for t in (1, 2, 3, 8):
        del seen[:]
        fit = sl.train(wide, X, Y, steps=6, epoch_steps=3, seed=0, stagnation=False, progress=False, threads=t)
        out[t] = (fit.network.parameters(), fit.state)
        assert (set(seen) == {t}) if t > 1 else not seen
    for t in (2, 3, 8):
        assert all(np.array_equal(a, b) for a, b in zip(out[1], out[t])), t
    for M in (300, 601):
        X = np.random.default_rng(M).uniform(-2, 2, size=(M, 2))
        blocks = harmonic.sample_blocks(wide.dims, M)
        ref = sl.harmonic_extension(wide, X, threads=1)
        for t in (2, 3, 4, 8):
            del workers[:]
            h = sl.harmonic_extension(wide, X, threads=t)
            assert workers == ([min(t, len(blocks) - 1)] if len(blocks) > 2 else []), (M, t, workers)
            assert np.array_equal(h.free, ref.free) and np.array_equal(h.output, ref.output)
            assert all(np.array_equal(a, b) for a, b in zip(h.pattern, ref.pattern))
            assert np.array_equal(h.self_consistent, ref.self_consistent)
    print("ok")
    """
    assert _python(code, {"NUMBA_NUM_THREADS": "8"}).strip() == "ok"


def test_training_and_harmonic_extension_follow_the_thread_policy():
    code = _FORCED_PARALLEL + """
    import contextlib
    assert sl.get_num_threads() == 1                     # SHEAFLINALG_NUM_THREADS
    net = sl.Network.random([2, 40, 1], seed=0)
    X, Y = sl.tasks.paraboloid(3000, seed=0)
    wide = sl.Network.random([2, 100, 100, 1], seed=1)
    assert len(tiled.train_tiles(np.array(net.dims), 82, 3000)[0]) > 2
    runs = {}
    for label, ctx in (("env", contextlib.nullcontext()), ("with", sl.num_threads(3))):
        del seen[:], workers[:]
        with ctx:
            sl.train(net, X, Y, steps=40, epoch_steps=20, stagnation=False, progress=False)
            sl.harmonic_extension(wide, X[:520])
        runs[label] = (sorted(set(seen)), workers[:])
    sl.set_num_threads(4)
    del seen[:], workers[:]
    sl.train(net, X, Y, steps=40, epoch_steps=20, stagnation=False, progress=False)
    sl.harmonic_extension(wide, X[:520])
    runs["set"] = (sorted(set(seen)), workers[:])
    print(runs)
    """
    out = _python(code, {"NUMBA_NUM_THREADS": "8", "SHEAFLINALG_NUM_THREADS": "1"}).strip()
    assert out == str({"env": ([], []), "with": ([3], [3]), "set": ([4], [4])})


def test_sample_blocks_give_the_small_batch_result_block_by_block():
    """Each block of a big batch is computed as that block alone would be with one BLAS thread: no result
    depends on the cut beyond the block, and a small batch is one block."""
    from sheaflinalg.sheaf.harmonic import sample_blocks

    net = sl.Network.random([3, 90, 80, 2], seed=2, output="softmax")
    X = np.random.default_rng(3).uniform(-2, 2, size=(1301, 3))
    bounds = sample_blocks(net.dims, len(X))
    assert len(bounds) > 3 and bounds[-1] - bounds[-2] < bounds[1]          # several blocks, ragged
    whole = sl.harmonic_extension(net, X, threads=2)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        assert sample_blocks(net.dims, hi - lo) == [0, hi - lo]
        with policy.blas_limit(1):
            alone = sl.harmonic_extension(net, X[lo:hi])
        np.testing.assert_array_equal(whole.free[lo:hi], alone.free)
    zs, _ = net.forward_states(X)
    np.testing.assert_allclose(whole.preactivations[-1], zs[-1], rtol=1e-12, atol=1e-12)


def test_an_overflow_in_one_block_names_the_forward_pass_layer():
    net = sl.Network.random([2, 100, 100, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(900, 2))
    X[700] = [1e308, -1e308]          # in a later block
    with pytest.raises(sl.NetworkOverflowError) as forward:
        net.forward_states(X)
    layer = str(forward.value).split("overflows at layer ")[1].split()[0]
    with pytest.raises(sl.NetworkOverflowError, match=f"overflows at layer {layer} "):
        sl.harmonic_extension(net, X, threads=2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_threads_of_training_and_harmonic_extension_are_checked(bad):
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises((TypeError, ValueError), match="threads"):
        sl.train(net, X, Y, steps=10, progress=False, threads=bad)
    with pytest.raises((TypeError, ValueError), match="threads"):
        sl.harmonic_extension(net, X, threads=bad)


def test_training_backs_off_to_one_thread_when_the_parallel_path_is_slower(monkeypatch):
    """A slow parallel path runs only short probes; a fast one takes most steps (same results).  The two
    paths are the serial kernel, one of them delayed, timed on a virtual clock (every step takes
    ``STEP_SECONDS``, the slow path's 2 ms more): the chooser's logic, not this machine's load or speed."""
    STEP_SECONDS = 1e-4
    import types
    from sheaflinalg.training.euler import tiled
    X, Y = sl.tasks.paraboloid(3000, seed=0)
    net = sl.Network.random([2, 40, 1], seed=0)
    counts = {}
    clock = [0.0]

    def slowed(kernel, name, delay):
        def run(*args):
            counts[name] = counts.get(name, 0) + args[6]           # n_steps
            clock[0] += (STEP_SECONDS + delay) * args[6]
            return kernel(*args)
        return run

    results = []
    for slow in ("tiled_steps_parallel", "tiled_steps"):
        counts.clear()
        policy._CHOICES.clear()
        monkeypatch.setattr(policy, "usable_threads", lambda threads: threads)   # not this machine's load
        monkeypatch.setattr(tiled, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
        for name in ("tiled_steps_parallel", "tiled_steps"):     # both serial: only the delay differs
            monkeypatch.setattr(tiled, name, slowed(tiled.tiled_steps, name, 2e-3 if name == slow else 0.0))
        fit = sl.train(net, X, Y, steps=24000, epoch_steps=1000, seed=0, stagnation=False, progress=False,
                       threads=2)
        results.append(fit.network.parameters())
        monkeypatch.undo()
        fast = "tiled_steps" if slow == "tiled_steps_parallel" else "tiled_steps_parallel"
        assert counts[fast] > 5 * counts[slow], (slow, counts)
    np.testing.assert_array_equal(results[0], results[1])


def test_training_runs_serially_while_the_machine_is_full(monkeypatch):
    from sheaflinalg.training.euler import tiled

    X, Y = sl.tasks.paraboloid(3000, seed=0)
    net = sl.Network.random([2, 40, 1], seed=0)
    ran = []
    kernel = tiled.tiled_steps_parallel
    monkeypatch.setattr(tiled, "tiled_steps_parallel", lambda *a: ran.append(1) or kernel(*a))
    monkeypatch.setattr(policy.SerialOrParallel, "choose", lambda self: True)
    monkeypatch.setattr(policy, "available_cores", lambda: 2)
    fits = []
    for runnable in (64, 1):                        # 63 other runnable tasks, then none
        monkeypatch.setattr(policy, "_LOAD", policy.LoadProbe(interval=0.0, memory=1, read=lambda r=runnable: r))
        monkeypatch.setattr(policy, "_last_parallel", (float("-inf"), 1))
        ran.clear()
        fits.append(sl.train(net, X, Y, steps=200, epoch_steps=100, seed=0, stagnation=False, progress=False,
                             threads=2))
        assert bool(ran) == (runnable == 1)
    np.testing.assert_array_equal(fits[0].network.parameters(), fits[1].network.parameters())
