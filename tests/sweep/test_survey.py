"""Surveys: one stored row per input equal to the per-input API calls; resume after an interruption and after
kill -9 of the driver; a Dask run equal to the local one; the command line."""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers.random_graphs import random_graph
import sheaflinalg as sl
from sheaflinalg.cli import main
from sheaflinalg.discord.pinning.targets import relabelled
from sheaflinalg.sweep import survey as survey_module

CHAIN = sl.Network.random([3, 7, 6, 4], seed=1)


def _inputs(net, n, seed=0):
    """``n`` inputs of ``net`` and labels, every third one not the network's answer (so both outcomes occur)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, net.n_inputs))
    X[0] = 0.0                                      # pre-activations equal to the biases
    labels = net.forward(X).argmax(axis=1)
    labels[1::3] = (labels[1::3] + 1 + rng.integers(0, net.n_outputs - 1, labels[1::3].size)) % net.n_outputs
    return X, labels


@pytest.mark.parametrize("net", [CHAIN, random_graph(2)], ids=["chain", "graph"])
def test_the_rows_equal_the_per_input_calls(net, tmp_path):
    X, labels = _inputs(net, 9)
    s = sl.survey(net, X, labels, store=tmp_path / "s.db", jobs=1, progress=False)
    assert s.index.tolist() == list(range(9)) and s.counts["done"] == 9 and not s.failed
    logits = net.forward(X)
    assert s.predicted.tolist() == logits.argmax(axis=1).tolist()
    assert s.correct.tolist() == (logits.argmax(axis=1) == labels).tolist()
    assert s.correct.sum() == 6
    for i in range(9):                              # each row against the API called on that input alone
        sp = sl.spectrum(net, X[i:i + 1], progress=False)
        assert s.lambda_min[i] == sp.lambda_min[0] and s.lambda_max[i] == sp.lambda_max[0]
        assert s.condition[i] == sp.condition[0]
        assert s.nodes == sp.block_names and np.array_equal(s.energy[i], sp.block_energy()[0])
    pd = sl.discord.pinned(net, X, relabelled(logits, labels))   # all inputs in one batch
    assert s.edges == list(pd.edge_names)
    np.testing.assert_allclose(s.discord, pd.by_edge, rtol=1e-9, atol=1e-12)
    assert np.all(s.discord_total[s.correct] < 1e-20) and np.all(s.discord_total[~s.correct] > 1e-6)
    assert s.settled.tolist() == pd.settled.tolist()


def test_an_interrupted_survey_resumes_with_every_input_once(tmp_path, monkeypatch):
    X, labels = _inputs(CHAIN, 12)
    db = tmp_path / "s.db"
    original, calls = survey_module.survey_row, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(survey_module, "survey_row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sl.survey(CHAIN, X, labels, store=db, progress=False)
    assert sl.SurveyResult.load(db).n_inputs == 5
    monkeypatch.setattr(survey_module, "survey_row", original)
    s = sl.survey(CHAIN, X, labels, store=db, progress=False)
    assert s.counts["skipped"] == 5 and s.counts["done"] == 7 and s.index.tolist() == list(range(12))
    fresh = sl.survey(CHAIN, X, labels, store=tmp_path / "fresh.db", progress=False)
    assert np.array_equal(s.lambda_min, fresh.lambda_min) and np.array_equal(s.discord, fresh.discord)


CHILD = """
import sys, time, numpy as np, sheaflinalg as sl
from sheaflinalg.sweep import survey as m
slow = m.survey_row
m.survey_row = lambda *a, **k: (time.sleep(0.3), slow(*a, **k))[1]     # long enough runs to be killed mid-survey
net = sl.Network.random([3, 7, 6, 4], seed=1)
X = np.random.default_rng(0).normal(size=(16, 3))
sl.survey(net, X, np.arange(16) % 4, store=sys.argv[1], jobs=2, progress=False)
"""


def test_a_survey_killed_with_sigkill_resumes_with_every_input_once(tmp_path):
    db = tmp_path / "s.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    n = 0
    while time.monotonic() < deadline and n < 2:         # kill once some, not all, inputs are stored
        time.sleep(0.05)
        try:
            n = sl.SurveyResult.load(db).n_inputs
        except sl.sweep.StoreError:                     # not there yet, or being created
            n = 0
    os.killpg(child.pid, signal.SIGKILL)                # the driver and its workers
    child.wait()
    before = sl.SurveyResult.load(db).n_inputs
    assert 2 <= before < 16, child.stderr.read().decode()
    X = np.random.default_rng(0).normal(size=(16, 3))
    s = sl.survey(CHAIN, X, np.arange(16) % 4, store=db, jobs=2, progress=False)
    assert s.counts["skipped"] == before and s.counts["done"] == 16 - before
    assert s.index.tolist() == list(range(16))
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 16
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_dask_survey_equals_the_local_one(tmp_path):
    pytest.importorskip("dask.distributed")
    from dask.distributed import Client, LocalCluster

    X, labels = _inputs(CHAIN, 6)
    local = sl.survey(CHAIN, X, labels, store=tmp_path / "l.db", progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        dasked = sl.survey(CHAIN, X, labels, store=tmp_path / "d.db", client=client, progress=False)
    assert dasked.counts["done"] == 6
    for field in ("predicted", "lambda_min", "lambda_max", "energy", "discord", "settled"):
        assert np.array_equal(getattr(local, field), getattr(dasked, field)), field


@pytest.mark.parametrize("call, message", [
    (lambda db: sl.survey(CHAIN, np.ones((2, 3)), None, store=db), "give labels"),
    (lambda db: sl.survey(CHAIN, np.ones((2, 3)), [0, 4], store=db), "classes 0..3"),
    (lambda db: sl.survey(CHAIN, np.ones((2, 3)), [0.5, 1], store=db), "integer classes"),
    (lambda db: sl.survey(sl.Network.random([3, 4, 2], output="softmax"), np.ones((2, 3)), [0, 1], store=db),
     "identity output"),
    (lambda db: sl.survey(CHAIN, np.ones((2, 3)), [0, 1], store=db, max_iter=0), "max_iter"),
    (lambda db: sl.SurveyResult.load(db), "no such sweep database"),
])
def test_refusals_write_nothing(call, message, tmp_path):
    db = tmp_path / "s.db"
    with pytest.raises(ValueError, match=message):
        call(db)
    assert not db.exists()


def test_groups_and_a_survey_without_labels_or_discord(tmp_path):
    s = sl.survey(CHAIN, np.eye(3), None, store=tmp_path / "s.db", discord=False, progress=False)
    assert s.labels.tolist() == [-1] * 3 and s.edges == [] and np.all(np.isnan(s.discord_total))
    assert list(s.groups("lambda_min")) == ["-1"] and s.groups("condition", by="outcome")["wrong"].size == 3
    with pytest.raises(ValueError, match="by must be"):
        s.groups("lambda_min", by="colour")


def test_survey_command_end_to_end(tmp_path, capsys):
    X, labels = _inputs(CHAIN, 5)
    net, xs, ys = tmp_path / "net.npz", tmp_path / "x.npy", tmp_path / "y.npy"
    CHAIN.save(net)
    np.save(xs, X)
    np.save(ys, labels)
    db, out, png = tmp_path / "s.db", tmp_path / "s.csv", tmp_path / "s.png"
    run = ["survey", "run", "--db", str(db), "--network", str(net), "--inputs", str(xs), "--jobs", "1", "--no-progress"]
    assert main(run + ["--labels", str(ys)]) == 0
    assert "5 inputs planned: 5 done now" in capsys.readouterr().out
    assert main(run + ["--labels", str(ys)]) == 0
    assert "5 kept from before" in capsys.readouterr().out
    assert main(["survey", "status", str(db)]) == 0
    assert capsys.readouterr().out.split("\n")[1].split() == ["survey", "5", "5", "0", "0", "0"]
    assert main(["survey", "export", str(db), "--csv", str(out)]) == 0
    with open(out, newline="") as f:
        table = list(csv.DictReader(f))
    assert sorted(int(r["input"]) for r in table) == list(range(5))
    assert [json.loads(r["lambda_min"]) for r in sorted(table, key=lambda r: int(r["input"]))] \
        == sl.SurveyResult.load(db).lambda_min.tolist()
    assert main(["survey", "plot", str(db), "--out", str(png)]) == 0 and png.stat().st_size > 0
    assert main(run) == 2                                # the discord needs labels
    assert "give labels" in capsys.readouterr().err
    assert main(["survey", "plot", str(db), "--name", "other", "--out", str(png)]) == 2
    assert "no survey named 'other'; it holds 'survey'" in capsys.readouterr().err
    assert main(["survey", "run", "--db", str(db), "--inputs", str(xs)]) == 2
    assert "--inputs has no effect with the case study's network" in capsys.readouterr().err


def test_another_network_under_the_same_name_is_refused_and_rows_are_shared_across_names(tmp_path):
    X, labels = _inputs(CHAIN, 4)
    db = tmp_path / "s.db"
    sl.survey(CHAIN, X, labels, store=db, discord=False, progress=False)
    other = sl.Network.random([3, 7, 6, 4], seed=2)
    with pytest.raises(sl.sweep.StoreError, match="a survey's --name"):
        sl.survey(other, X, labels, store=db, discord=False, progress=False)
    more = sl.survey(CHAIN, np.vstack([X, X[:1] + 1.0]), np.append(labels, 0), store=db, discord=False,
                     name="five", progress=False)
    assert more.counts["skipped"] == 4 and more.counts["done"] == 1 and more.n_inputs == 5
