"""The acceptance test: replaying the recorded Table E.1 inputs reproduces the recorded curves."""

import pytest

from sheaflinalg import tasks
from sheaflinalg.reproduce import table_e1 as reproduce_table_e1

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


def test_replay_writes_tables_and_resumes_finished_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce_table_e1, "process_pool", _InlinePool)  # keep the runs in this process
    out = tmp_path / "t"
    (out / "runs").mkdir(parents=True)

    def table(resume):
        results = reproduce_table_e1.run_all(["paraboloid_1H"], 1000, 1, str(out), resume, progress=False)
        return reproduce_table_e1.tables(results)[0], reproduce_table_e1.runs_json(results)

    md, runs = table(resume=False)
    assert "Paraboloid | 1H" in md and "Ratio" in md and '"stagnation"' in runs
    assert (out / "runs" / "paraboloid_1H-sheaf-1000.json").exists()

    def must_not_rerun(*args):
        raise AssertionError("a finished run was computed again")

    monkeypatch.setattr(reproduce_table_e1, "run_one", must_not_rerun)
    assert table(resume=True)[0] == md
    with pytest.raises(AssertionError, match="computed again"):
        table(resume=False)  # without resume every run is recomputed


class _InlinePool:
    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, fn, *iterables):
        return map(fn, *iterables)
