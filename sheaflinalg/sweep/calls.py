"""How a run's parameters become a call, and which metrics each function reports.

=========  ======================================================================================
function   call
=========  ======================================================================================
train      ``sl.train(net, data.X_train, data.Y_train, data.X_test, data.Y_test, seed=seed, **rest)``
           with ``net = sl.Network.random(arch, seed=seed, output=output or the task's)`` and
           ``data = sl.tasks.make(task, n_train, n_test, seed=seed)``; with ``record`` and
           ``group`` (a recorded paper sweep, :func:`sheaflinalg.tasks.paper_sweep`) the network,
           the data and the initial stalks are the record's instead.
sgd        ``sl.sgd(net, data.X_train, data.Y_train, data.X_test, data.Y_test, **rest)``, same
           ``net`` and ``data``.
heat       ``sl.heat(net, X, seed=seed, **rest)`` with ``X = sl.tasks.make(task, n_inputs, 1,
           seed=seed).X_train`` and ``net`` as above (``output`` default identity).
spectrum   ``sl.spectrum(net, X, **rest)``, same ``net`` and ``X``.
verify     ``sl.verify(net, X, **rest)``, same ``net`` and ``X``.
=========  ======================================================================================

``rest`` are the remaining parameters, passed as keywords; ``seed`` drives
everything random in a run.  Every run runs with one thread for the kernels
and for BLAS, so a run gives the same numbers in any executor.
"""

import functools
import math
import time

import numpy as np

from .. import tasks
from .._common.threads import blas_limit, num_threads
from .._common.validation import check_int, check_positive, check_real, check_seed, check_tol
from ..dynamics.euler.settings import OUTPUT_FORCES
from ..dynamics.heat import heat
from ..network.activations import OUTPUTS
from ..network.model import Network
from ..sheaf.assembled.factor import BACKENDS
from ..sheaf.state import INITS
from ..sheaf.verification.verify import verify
from ..spectral.drivers import METHODS as SPECTRUM_METHODS, SYSTEMS, spectrum
from ..spectral.tracker import SpectralTracker
from ..training.train import train
from ..training.losses import LOSSES
from ..training.sgd import sgd

SETUP_TRAINING = {"task": str, "arch": list, "output": str, "n_train": int, "n_test": int, "seed": int,
                  "record": str, "group": str, "track_every": int}
SETUP_INPUTS = {"task": str, "arch": list, "output": str, "n_inputs": int, "seed": int}
TRAIN_METRICS = ("final_train_loss", "final_test_loss", "final_train_accuracy", "final_test_accuracy",
                 "min_test_loss", "steps", "seconds", "diverged")

FUNCTIONS = {
    "train": dict(setup=SETUP_TRAINING, keywords={
        "alpha": float, "beta": float, "dt": float, "steps": int, "init": str, "warm_start": bool,
        "epoch_steps": int, "loss": str, "loss_param": float, "record_every": int, "stagnation": bool},
        metrics=TRAIN_METRICS + ("stagnation_bound", "stagnation_holds", "lambda_min_median",
                                 "max_rel_error_to_record")),
    "sgd": dict(setup=SETUP_TRAINING, keywords={
        "lr": float, "epochs": int, "loss": str, "loss_param": float, "record_every": int},
        metrics=TRAIN_METRICS + ("lambda_min_median",)),
    "heat": dict(setup=SETUP_INPUTS, keywords={
        "alpha": float, "dt": float, "max_steps": int, "tol": float, "init": str, "output_force": str,
        "reduced": bool, "crossings": bool, "check_stability": bool},
        metrics=("steps", "converged", "final_change", "max_forward_error", "discord_total", "crossings_total",
                 "sliding_total", "seconds")),
    "spectrum": dict(setup=SETUP_INPUTS, keywords={
        "k": int, "system": str, "method": str, "tol": float, "maxiter": int, "ncv": int, "dense_max": int},
        metrics=("lambda_min_median", "lambda_max_median", "condition_median", "lambda_min_min", "n_distinct",
                 "seconds")),
    "verify": dict(setup=SETUP_INPUTS, keywords={"tol": float, "logdet_tol": float, "backend": str},
                   metrics=("passed", "n_samples", "seconds")),
}
DEFAULTS = {"task": "paraboloid", "arch": [2, 30, 1], "output": None, "n_train": 300, "n_test": 100, "seed": 0,
            "n_inputs": 50, "record": None, "group": None, "track_every": 0}



def _finite(value, name):
    value = check_real(value, name)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def _count(minimum):
    return lambda value, name: check_int(value, name, minimum)


#: The checks the calls apply to each parameter (the library's own validators), run on every value of
#: a sweep before its first run: a check function, or the tuple of accepted strings.
DOMAINS = {
    "alpha": check_positive, "beta": check_positive, "dt": check_positive, "lr": check_positive,
    "tol": check_tol, "logdet_tol": check_tol, "loss_param": _finite, "seed": check_seed,
    "steps": _count(1), "epochs": _count(1), "epoch_steps": _count(1), "record_every": _count(1),
    "max_steps": _count(1), "n_train": _count(1), "n_test": _count(1), "n_inputs": _count(1), "k": _count(1),
    "maxiter": _count(1), "ncv": _count(1), "dense_max": _count(0), "track_every": _count(0),
    "task": tasks.TASKS, "output": OUTPUTS, "init": INITS, "loss": LOSSES, "output_force": OUTPUT_FORCES,
    "system": SYSTEMS, "method": SPECTRUM_METHODS, "backend": BACKENDS, "record": tasks.PAPER_SWEEPS,
}


@functools.lru_cache(maxsize=None)
def task_widths(task):
    """``(inputs, outputs)`` of a task's samples, from one sample of :func:`sheaflinalg.tasks.make`."""
    data = tasks.make(task, 1, 1, seed=0)
    return data.X_train.shape[1], data.Y_train.shape[1]


def parameters(function):
    """``{name: type}`` of every parameter a run of ``function`` accepts."""
    spec = FUNCTIONS[function]
    return {**spec["setup"], **spec["keywords"]}


def run(function, params, context=None):
    """Run one parameter set; returns ``(metrics dict, artifacts dict of arrays)``.

    Runs with one kernel thread and one BLAS thread, so the numbers do not depend on where it runs.
    ``context`` (optional): an object whose ``run(params)`` computes the run instead of ``function``'s
    call (a survey's network and inputs, :class:`sheaflinalg.sweep.survey.SurveyTask`).
    """
    with num_threads(1), blas_limit(1):
        start = time.perf_counter()
        if context is not None:
            metrics, arrays = context.run(params)
        elif function in ("train", "sgd"):
            metrics, arrays = _training(function, params)
        else:
            metrics, arrays = _inputs(function, params)
        metrics["seconds"] = time.perf_counter() - start
    return metrics, arrays


def _split(function, params):
    setup = {k: params.get(k, DEFAULTS[k]) for k in FUNCTIONS[function]["setup"]}
    rest = {k: v for k, v in params.items() if k not in setup}
    return setup, rest


def _training(function, params):
    s, rest = _split(function, params)
    tracker = None
    if s["track_every"]:
        tracker = SpectralTracker(every=s["track_every"])
        rest.update(callback=tracker, callback_every=s["track_every"])
    if s["record"] is not None:
        rec = tasks.paper_sweep(s["record"], s["group"])
        net, X, Y, Xt, Yt = rec.network, rec.X_train, rec.Y_train, rec.X_test, rec.Y_test
        if "n_train" in params and params["n_train"] != X.shape[0]:
            raise ValueError(f"n_train={params['n_train']} but the record {s['record']!r} has {X.shape[0]} "
                             "training samples")
        if function == "train":
            rest.setdefault("init", rec.init)
    else:
        data = tasks.make(s["task"], s["n_train"], s["n_test"], seed=s["seed"])
        net = Network.random(s["arch"], seed=s["seed"], output=s["output"] or data.output)
        X, Y, Xt, Yt = data.X_train, data.Y_train, data.X_test, data.Y_test
    if function == "train":
        fit = train(net, X, Y, Xt, Yt, seed=s["seed"], progress=False, **rest)
    else:
        fit = sgd(net, X, Y, Xt, Yt, progress=False, **rest)
    h = fit.history
    m = {"final_train_loss": h.train_loss[-1], "final_test_loss": h.test_loss[-1],
         "final_train_accuracy": h.train_accuracy[-1], "final_test_accuracy": h.test_accuracy[-1],
         "min_test_loss": min(v for v in h.test_loss if v is not None), "steps": h.step[-1],
         "diverged": bool(h.diverged)}
    if function == "train":
        m["stagnation_bound"] = h.stagnation.get("bound")
        m["stagnation_holds"] = h.stagnation.get("holds")
    if tracker is not None:
        m["lambda_min_median"] = float(np.median(tracker.series("lambda_min")[1]))
    if s["record"] is not None and function == "train":
        m["max_rel_error_to_record"] = _record_error(rec, h, params)
    arrays = {"train_loss": np.asarray(h["train_loss"]), "test_loss": np.asarray(h["test_loss"]),
              "step": np.asarray(h["step"]), "theta": fit.network.parameters()}
    return m, arrays


def _record_error(rec, history, params):
    """Largest relative difference between the run's curves and the recorded run with the same ``beta``,
    ``dt`` and ``epoch_steps`` (over the records both have; None when the record has no such run)."""
    def same(run, key, default):
        return math.isclose(run[key], params.get(key, default), rel_tol=1e-12)

    candidates = [r for r in rec.runs.values()
                  if same(r, "beta", math.nan) and same(r, "dt", 0.005) and same(r, "epoch_steps", 1000)]
    candidates.sort(key=lambda r: r["n_steps"] != params.get("steps"))    # the same length first
    for run in candidates[:1]:
            errs = []
            for curve, got in (("train_curve", history["train_loss"]), ("test_curve", history["test_loss"])):
                n = min(len(got), len(run[curve]))
                errs.append(float(np.max(np.abs(got[:n] - run[curve][:n]) / np.abs(run[curve][:n]))))
            return max(errs)
    return None


def _inputs(function, params):
    s, rest = _split(function, params)
    X = tasks.make(s["task"], s["n_inputs"], 1, seed=s["seed"]).X_train
    net = Network.random(s["arch"], seed=s["seed"], output=s["output"] or "identity")
    if function == "heat":
        r = heat(net, X, seed=s["seed"], progress=False, **rest)
        m = {"steps": r.steps, "converged": bool(r.converged), "final_change": r.final_change,
             "max_forward_error": float(np.abs(r.output - net.forward(X)).max()),
             "discord_total": float(r.discord.sum()), "crossings_total": r.crossings_total,
             "sliding_total": r.sliding_total}
        return m, {"output": r.output}
    if function == "spectrum":
        r = spectrum(net, X, vectors=False, progress=False, **rest)
        m = {"lambda_min_median": float(np.median(r.lambda_min)), "lambda_max_median": float(np.median(r.lambda_max)),
             "condition_median": float(np.median(r.condition)), "lambda_min_min": float(r.lambda_min.min()),
             "n_distinct": r.n_distinct}
        return m, {"lambda_min": r.lambda_min, "lambda_max": r.lambda_max}
    r = verify(net, X, **rest)
    return {"passed": bool(r.passed), "n_samples": int(X.shape[0])}, {}
