"""The MNIST-1D benchmark's shared start (benchmarks/mnist1d_training.py): one set of initial weights in torch
and in the imported network, and one batch order, so that every row of its table starts equal."""

import importlib.util

import numpy as np
import pytest

from helpers.paths import ROOT
from sheaflinalg.training.batches import epoch_batches

torch = pytest.importorskip("torch")

PATH = ROOT / "benchmarks" / "mnist1d_training.py"
spec = importlib.util.spec_from_file_location("mnist1d_training", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_torch_model_and_imported_network_agree(arch):
    X = np.random.default_rng(1).normal(size=(50, 40))
    model = bench.torch_model(arch, seed=3)
    net = bench.softmax_network(model, arch)
    assert net.output == "softmax" and net.is_graph == (arch == "cnn")
    P = bench.torch_probabilities(model, X, arch)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    assert bench.forward_disagreement(model, net, X, arch) < 1e-13
    # the seed alone decides the weights, and the caller's torch random state is left as it was
    state = torch.random.get_rng_state()
    same, other = (list(bench.torch_model(arch, seed).parameters()) for seed in (3, 4))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same))
    assert not any(torch.equal(a, b) for a, b in zip(model.parameters(), other))


def test_epoch_orders_are_seeded_permutations():
    orders = bench.epoch_orders(7, 23, 4)
    assert len(orders) == 4
    for order in orders:
        assert sorted(order.tolist()) == list(range(23))
    assert len({tuple(o) for o in orders}) == 4
    again = bench.epoch_orders(7, 23, 4)
    assert all(np.array_equal(a, b) for a, b in zip(orders, again))
    # the order sl.train(method="equilibrium", seed=7) draws: its run's generator, one epoch after another
    rng = np.random.default_rng(7)
    for order in orders:
        batches = epoch_batches(23, 5, rng)
        assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
        assert np.array_equal(np.concatenate(batches), order)


def test_seed_summary_gives_each_seeds_accuracies_and_their_mean_and_spread(tmp_path):
    def curve(method, final, seconds):
        return bench.Curve(method, np.array([0.0, 1.0, 2.0]), np.array([0.0, seconds / 2, seconds]),
                           np.array([0.1, 0.5, final]))
    finals = {0: (0.70, 0.68), 1: (0.66, 0.67), 2: (0.69, 0.66)}
    results = {f"mlp@seed{seed}": (curve("torch backprop (Adam)", t, 1.0), [curve("equilibrium, default", e, 1.5)])
               for seed, (t, e) in finals.items()}
    text = bench.seed_summary(results)
    torch_acc = 100 * np.array([t for t, _ in finals.values()])
    diff = 100 * np.array([e - t for t, e in finals.values()])
    assert "mlp, 3 seeds" in text
    assert f"| 1 | 66.0% | 67.0% (+1.0) |" in text
    assert f"{torch_acc.mean():.1f} +- {torch_acc.std(ddof=1):.1f}%" in text
    assert f"({diff.mean():+.1f} +- {diff.std(ddof=1):.1f})" in text
    assert "| s / epoch, x torch (mean) | 1.00 | 1.50 |" in text
    bench.seed_figure(results, tmp_path / "seeds.png")
    assert (tmp_path / "seeds.png").stat().st_size > 0
