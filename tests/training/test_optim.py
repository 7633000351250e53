"""Optimisers, schedules and mini-batches against naive formulas written here (and torch.optim)."""

import math

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.training.batches import batches_per_epoch, check_batch_size, epoch_batches

RNG = np.random.default_rng(7)
THETA0 = RNG.standard_normal(6)
GRADS = RNG.standard_normal((12, 6))
LRS = 0.05 * (1.0 + 0.5 * np.sin(np.arange(12)))        # a varying learning rate, as a schedule gives


def run(opt, lrs=LRS):
    theta, state = THETA0.copy(), opt.init_state(THETA0.size)
    for t, (g, lr) in enumerate(zip(GRADS, lrs), start=1):
        opt.update(theta, g, state, t, lr)
    return theta


def naive_sgd(momentum, nesterov, wd):
    theta, buf = THETA0.copy(), None
    for g, lr in zip(GRADS, LRS):
        g = g + wd * theta
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        theta = theta - lr * g
    return theta


def naive_adam(b1, b2, eps, wd, decoupled):
    theta, m, v = THETA0.copy(), np.zeros(6), np.zeros(6)
    for t, (g, lr) in enumerate(zip(GRADS, LRS), start=1):
        if decoupled:
            theta = theta - lr * wd * theta
        else:
            g = g + wd * theta
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
    return theta


@pytest.mark.parametrize("momentum, nesterov, wd", [(0.0, False, 0.0), (0.9, False, 0.0), (0.8, True, 0.1),
                                                    (0.5, False, 0.01)])
def test_sgd_and_momentum_match_the_formulas(momentum, nesterov, wd):
    got = run(sl.optim.SGD(lr=1.0, momentum=momentum, nesterov=nesterov, weight_decay=wd))
    np.testing.assert_allclose(got, naive_sgd(momentum, nesterov, wd), rtol=1e-13, atol=1e-14)
    if momentum:
        same = run(sl.optim.Momentum(lr=1.0, momentum=momentum, nesterov=nesterov, weight_decay=wd))
        np.testing.assert_array_equal(same, got)


@pytest.mark.parametrize("cls, betas, wd", [(sl.optim.Adam, (0.9, 0.999), 0.0), (sl.optim.Adam, (0.5, 0.9), 0.1),
                                            (sl.optim.AdamW, (0.9, 0.999), 0.01), (sl.optim.AdamW, (0.0, 0.5), 0.3)])
def test_adam_and_adamw_match_the_formulas(cls, betas, wd):
    got = run(cls(lr=1.0, betas=betas, eps=1e-8, weight_decay=wd))
    np.testing.assert_allclose(got, naive_adam(*betas, 1e-8, wd, cls is sl.optim.AdamW), rtol=1e-12, atol=1e-14)


def test_the_optimisers_agree_with_torch_on_the_same_gradients():
    torch = pytest.importorskip("torch")
    cases = [(sl.optim.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1),
              lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
             (sl.optim.Adam(lr=0.05, weight_decay=0.1), lambda p: torch.optim.Adam(p, lr=0.05, weight_decay=0.1)),
             (sl.optim.AdamW(lr=0.05, weight_decay=0.1), lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1))]
    for ours, make_theirs in cases:
        p = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
        theirs = make_theirs([p])
        for g in GRADS:
            p.grad = torch.tensor(g, dtype=torch.float64)
            theirs.step()
        got = run(ours, lrs=[ours.lr] * len(GRADS))
        np.testing.assert_allclose(got, p.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=repr(ours))


def test_optimisers_from_names_and_their_refusals():
    assert sl.optim.make_optimizer("adam", 0.01) == sl.optim.Adam(0.01)
    assert sl.optim.make_optimizer("SGD").lr == sl.optim.DEFAULT_LR["sgd"]
    assert sl.optim.make_optimizer("nesterov", 0.1) == sl.optim.Momentum(0.1, nesterov=True)
    opt = sl.optim.AdamW(lr=1e-3)
    assert sl.optim.make_optimizer(opt) is opt
    with pytest.raises(ValueError, match="did you mean 'momentum'"):
        sl.optim.make_optimizer("momentun")
    with pytest.raises(ValueError, match="give lr to the optimizer instance"):
        sl.optim.make_optimizer(opt, 0.1)
    with pytest.raises(TypeError, match="optimizer must be a name"):
        sl.optim.make_optimizer(3)
    bad = [(lambda: sl.optim.SGD(lr=0.0), ValueError, "lr"), (lambda: sl.optim.SGD(lr=math.nan), ValueError, "lr"),
           (lambda: sl.optim.SGD(lr="1"), TypeError, "lr"), (lambda: sl.optim.SGD(0.1, momentum=1.0), ValueError, "momentum"),
           (lambda: sl.optim.SGD(0.1, nesterov=True), ValueError, "nesterov"),
           (lambda: sl.optim.Momentum(0.1, momentum=0.0), ValueError, "momentum"),
           (lambda: sl.optim.Adam(0.1, betas=(0.9,)), TypeError, "betas"),
           (lambda: sl.optim.Adam(0.1, betas=(0.9, 1.0)), ValueError, r"betas\[1\]"),
           (lambda: sl.optim.Adam(0.1, eps=0.0), ValueError, "eps"),
           (lambda: sl.optim.AdamW(0.1, weight_decay=-1.0), ValueError, "weight_decay"),
           (lambda: sl.optim.SGD(0.1, nesterov="yes", momentum=0.5), TypeError, "nesterov")]
    for make, error, name in bad:
        with pytest.raises(error, match=name):
            make()


def test_schedules_match_their_formulas():
    total = 50
    for t in range(total):
        assert sl.optim.Constant().factor(t, total) == 1.0
        assert sl.optim.Step(every=7, gamma=0.5).factor(t, total) == 0.5 ** (t // 7)
        assert sl.optim.Exponential(gamma=0.9).factor(t, total) == pytest.approx(0.9 ** t, rel=1e-14)
        assert sl.optim.Cosine(final=0.1).factor(t, total) == pytest.approx(
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t / total)), rel=1e-14)
        w = sl.optim.Cosine(warmup=10).factor(t, total)
        expected = (t + 1) / 11 if t < 10 else 0.5 * (1 + math.cos(math.pi * (t - 10) / 40))
        assert w == pytest.approx(expected, rel=1e-14)
    # The named defaults: decay to 1/100 by the last step; steps of 0.1 at a third and two thirds.
    assert sl.optim.Exponential().factor(total - 1, total) == pytest.approx(0.01, rel=1e-12)
    assert [sl.optim.Step().factor(t, 9) for t in (2, 3, 5, 6)] == pytest.approx([1.0, 0.1, 0.1, 0.01])
    assert sl.optim.make_schedule(None) == sl.optim.Constant()
    assert sl.optim.make_schedule("Cosine") == sl.optim.Cosine()
    with pytest.raises(ValueError, match="did you mean 'exponential'"):
        sl.optim.make_schedule("exponentail")
    with pytest.raises(TypeError, match="schedule must be a name"):
        sl.optim.make_schedule(0.5)
    with pytest.raises(ValueError, match="warm-up"):
        sl.optim.Cosine(warmup=50).check(50)
    for make, name in [(lambda: sl.optim.Step(gamma=0.0), "gamma"), (lambda: sl.optim.Cosine(final=2.0), "final"),
                       (lambda: sl.optim.Constant(warmup=-1), "warmup"), (lambda: sl.optim.Step(every=0), "every")]:
        with pytest.raises(ValueError, match=name):
            make()


def test_batches_cover_the_data_once_keep_the_last_partial_batch_and_replay_from_the_generator_state():
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    first = epoch_batches(10, 4, rng)
    assert [len(b) for b in first] == [4, 4, 2] == [4, 4, 2][:batches_per_epoch(10, 4)]
    assert sorted(np.concatenate(first).tolist()) == list(range(10))
    second = epoch_batches(10, 4, rng)
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))     # reshuffled every epoch
    replay = np.random.default_rng(99)
    replay.bit_generator.state = state
    assert all(np.array_equal(a, b) for a, b in zip(first, epoch_batches(10, 4, replay)))
    assert check_batch_size(10, 10) == 10
    with pytest.raises(ValueError, match="at most the number of training samples"):
        check_batch_size(11, 10)
    with pytest.raises(ValueError, match="batch_size"):
        check_batch_size(0, 10)
    with pytest.raises(TypeError, match="batch_size"):
        check_batch_size(2.0, 10)
