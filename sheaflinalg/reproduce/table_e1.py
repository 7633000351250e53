"""Table E.1 of the paper replayed from its exact inputs, and the learned-output figure of appendix E.2.

For each configuration of the shipped ``table_e1`` records the recorded protocol (initial
weights, data and initial stalks from the file) is replayed with the sheaf
dynamics and with the SGD baseline, and every recorded point of the file's
curves is checked (sheaf to :data:`SHEAF_TOL`, SGD to :data:`SGD_TOL`
relative).  ``sheaflinalg reproduce table_e1`` is the command line.
"""

import csv
import io
import json
import os
import time

import numpy as np
from tqdm.auto import tqdm

from .. import tasks
from .._common.atomic import write_text
from .._common.npzfile import FileFormatError
from .._common.records import load_record
from .._common.threads import pool_workers, process_pool
from ..network.model import Network
from ..plotting.training import plot_learned_outputs
from .output import MISMATCH

SHEAF_TOL, SGD_TOL = 1e-8, 1e-6


def run_one(name, method, steps):
    """Replay one configuration with one method; returns a JSON-ready dictionary."""
    exp = tasks.table_e1(name)
    t = time.perf_counter()
    extra = {"stagnation": True} if method == "sheaf" else {}
    fit = exp.fit(steps=steps, method=method, **extra)
    h = fit.history
    out = {"name": name, "method": method, "task": name.split("_")[0], "depth": name.split("_")[1],
           "arch": exp.network.dims, "reference_seconds": exp.meta.get(f"{method}_seconds"),
           "train": h.train_loss[-1], "test": h.test_loss[-1], "seconds": time.perf_counter() - t,
           "max_rel_error": exp.max_relative_error(h, method), "records": len(h),
           "parameters": fit.network.parameters().tolist()}
    if method == "sheaf":
        out["stagnation"] = dict(h.stagnation, weight_displacement=h.weight_displacement,
                                 state_norm=h.state_norm, step=h.step)
    return out


#: What a cached run (``out/runs/NAME-METHOD-STEPS.json``, written by :func:`run_cached`) holds.
RUN_RECORD = {"name": "a string", "method": "a string", "task": "a string", "depth": "a string", "arch": "a list",
              "reference_seconds": "a number or null", "train": "a number", "test": "a number",
              "seconds": "a number", "max_rel_error": "a number", "records": "a number", "parameters": "a list"}


def _run_path(out, name, method, steps):
    return os.path.join(out, "runs", f"{name}-{method}-{steps or 'protocol'}.json")


def read_cached(name, method, steps, out):
    """The cached result of one run (None when it has not finished), checked against :data:`RUN_RECORD`
    (an edited file is a :class:`~sheaflinalg._common.npzfile.FileFormatError` saying how to start over)."""
    path = _run_path(out, name, method, steps)
    start_over = "delete it to compute that run again"
    try:
        record = load_record(path, dict(RUN_RECORD, stagnation="an object") if method == "sheaf" else RUN_RECORD,
                             start_over)
    except FileNotFoundError:
        return None
    if (record["name"], record["method"]) != (name, method):
        raise FileFormatError(f"{path}: holds the run {record['name']!r} ({record['method']}), not {name!r} "
                              f"({method}); {start_over}")
    return record


def run_cached(name, method, steps, out):
    """:func:`run_one`, keeping its result in ``out/runs/`` (written atomically as soon as it ends, so an
    interrupted reproduction restarts only the runs that had not finished)."""
    result = run_one(name, method, steps)
    if out is not None:
        write_text(_run_path(out, name, method, steps), json.dumps(result))
    return result


def run_all(names, steps=None, jobs=2, out=None, resume=False, progress=True):
    """Sheaf and SGD runs of every configuration in ``names`` on at most ``jobs`` worker processes.

    Returns one combined record per configuration, in the order of ``names``.  Results are kept in
    ``out/runs/`` when ``out`` is given; with ``resume`` the runs found there are reused (all read
    and checked before any run starts: :func:`read_cached`) and only the others run, on no more
    workers than they are, nor than the cores (:func:`~sheaflinalg._common.threads.pool_workers`).
    """
    # Longest runs first (sheaf before SGD, two hidden layers, blobs), so the workers finish together.
    work = sorted(((name, method) for name in names for method in ("sheaf", "sgd")),
                  key=lambda job: (job[1] == "sgd", job[0].endswith("1H"), not job[0].startswith("blobs")))
    done = {}
    if out is not None and resume:
        done = {job: r for job in work if (r := read_cached(*job, steps, out)) is not None}
    todo = [job for job in work if job not in done]
    workers = pool_workers(jobs, len(todo))
    if out is not None:
        os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    if workers:
        n = len(todo)
        with process_pool(workers) as pool:   # one kernel thread and one BLAS thread per worker
            runs = pool.map(run_cached, [j[0] for j in todo], [j[1] for j in todo], [steps] * n, [out] * n)
            done.update(((r["name"], r["method"]), r)
                        for r in tqdm(runs, total=n, desc="Table E.1 runs", unit="run", disable=not progress))
    return [combine(done[name, "sheaf"], done[name, "sgd"]) for name in names]


def combine(sheaf, sgd):
    """One configuration's record: its sheaf and SGD runs side by side."""
    keys = ("name", "task", "depth", "arch")
    out = {k: sheaf[k] for k in keys}
    out["reference_seconds"] = {"sheaf": sheaf["reference_seconds"], "sgd": sgd["reference_seconds"]}
    for method, run in (("sheaf", sheaf), ("sgd", sgd)):
        out[method] = {k: run[k] for k in ("train", "test", "seconds", "max_rel_error", "records", "parameters")}
    out["stagnation"] = sheaf["stagnation"]
    return out


def tables(results):
    head = ["Task", "Depth", "Sheaf Train", "SGD Train", "Sheaf Test", "SGD Test", "Ratio"]
    rows = []
    for r in results:
        ratio = r["sheaf"]["test"] / r["sgd"]["test"]
        rows.append([r["task"].capitalize(), r["depth"], f"{r['sheaf']['train']:.4f}", f"{r['sgd']['train']:.4f}",
                     f"{r['sheaf']['test']:.4f}", f"{r['sgd']['test']:.4f}", f"{ratio:.1f}"])
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(row[:-1] + [row[-1] + "x"]) + " |" for row in rows]
    tex = ["\\begin{tabular}{llccccc}", "\\toprule", " & ".join(head) + " \\\\", "\\midrule"]
    tex += ["  " + " & ".join(row[:-1] + [row[-1] + "$\\times$"]) + " \\\\" for row in rows]
    tex += ["\\bottomrule", "\\end{tabular}"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["task", "depth", "sheaf_train", "sgd_train", "sheaf_test", "sgd_test", "ratio",
                "sheaf_max_rel_error", "sgd_max_rel_error", "sheaf_seconds", "sgd_seconds"])
    for r in results:
        w.writerow([r["task"], r["depth"], repr(r["sheaf"]["train"]), repr(r["sgd"]["train"]),
                    repr(r["sheaf"]["test"]), repr(r["sgd"]["test"]), repr(r["sheaf"]["test"] / r["sgd"]["test"]),
                    r["sheaf"]["max_rel_error"], r["sgd"]["max_rel_error"], round(r["sheaf"]["seconds"], 3),
                    round(r["sgd"]["seconds"], 3)])
    return "\n".join(md) + "\n", "\n".join(tex) + "\n", buf.getvalue()


def learned_output_rows(results):
    """Rows of :func:`~sheaflinalg.plotting.training.plot_learned_outputs` from the one-hidden-layer results."""
    rows = []
    for task in tasks.TASKS:
        r = next((r for r in results if r["name"] == f"{task}_1H"), None)
        if r is None:
            continue
        exp = tasks.table_e1(r["name"])
        nets = {m: Network.from_parameters(np.array(r[m]["parameters"]), r["arch"], exp.network.output)
                for m in ("sheaf", "sgd")}
        target = (lambda X, t=task: tasks.target_function(t, X)) if task in ("paraboloid", "saddle") else None
        rows.append({"task": task, "X": exp.X_train, "Y": exp.Y_train, "target": target, **nets})
    return rows


def item(outputs, quick, jobs=1):
    """``tab:full-results`` (Table E.1) and ``fig:all-training-outputs``; quick: two configurations, 1000 steps."""
    names = ["paraboloid_1H", "blobs_1H"] if quick else list(tasks.TABLE_E1)
    steps = 1000 if quick else None
    results = run_all(names, steps, jobs, outputs.path("cache", "table_e1"), resume=True, progress=False)
    paths = outputs.table("table_e1", *tables(results))
    paths += outputs.text(os.path.join("tables", "table_e1_runs.json"), runs_json(results))
    paths += outputs.figure(plot_learned_outputs(learned_output_rows(results)), "table_e1_outputs")
    worst = max(max(r["sheaf"]["max_rel_error"], r["sgd"]["max_rel_error"]) for r in results)
    ok = all(r["sheaf"]["max_rel_error"] < SHEAF_TOL and r["sgd"]["max_rel_error"] < SGD_TOL for r in results)
    return paths, (f"{len(results)} configurations, {steps or 'protocol'} steps; recorded curves "
                   f"{'reproduced' if ok else MISMATCH} (largest relative deviation {worst:.1e})")


def runs_json(results):
    """Every run's reproduction error, wall time (and the reference's), and the stagnation bound's records."""
    runs = [{**r, "sheaf": {k: v for k, v in r["sheaf"].items() if k != "parameters"},
             "sgd": {k: v for k, v in r["sgd"].items() if k != "parameters"}} for r in results]
    return json.dumps({"runs": runs}, indent=1)
