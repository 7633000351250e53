"""The compiled loops release the GIL: runs in parallel threads give exactly the sequential results."""

import threading

import numpy as np

import sheaflinalg as sl


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
