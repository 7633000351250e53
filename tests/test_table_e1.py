"""The acceptance test: replaying the recorded Table E.1 inputs reproduces the recorded curves."""

import pytest

from sheaflinalg import tasks

ONE_HIDDEN = [f"{t}_1H" for t in tasks.TASKS]
TWO_HIDDEN = [f"{t}_2H" for t in tasks.TASKS]


@pytest.mark.parametrize("name", ONE_HIDDEN)
def test_sheaf_curves_first_10_epochs(name):
    exp = tasks.table_e1(name)
    hist = exp.run(steps=10_000, method="sheaf")
    assert len(hist.train_loss) == 11
    assert exp.max_relative_error(hist, "sheaf") < 1e-8


@pytest.mark.parametrize("name", ONE_HIDDEN)
def test_sgd_curves_first_10_records(name):
    exp = tasks.table_e1(name)
    hist = exp.run(steps=10_000, method="sgd")
    assert hist.epoch == list(range(0, 10_001, 1000))
    assert exp.max_relative_error(hist, "sgd") < 1e-6


@pytest.mark.parametrize("name", TWO_HIDDEN)
def test_two_hidden_layers_first_epochs(name):
    exp = tasks.table_e1(name)
    assert exp.max_relative_error(exp.run(steps=3000, method="sheaf"), "sheaf") < 1e-8
    assert exp.max_relative_error(exp.run(steps=4000, method="sgd"), "sgd") < 1e-6
