"""MNIST-1D training against torch backprop (issue 23): one initial network, one batch order, one table.

For each architecture -- the MLP ``[40, 100, 100, 10]`` and the MNIST-1D CNN of
``sheaflinalg/reproduce/mnist1d_cnn.py`` -- the torch model is built once from ``--seed`` (float64)
and imported with ``sl.Network.from_torch`` (softmax output); the two forward passes must agree on
the test set before anything trains.  Every row starts from those weights:

* torch backprop: Adam (``--lr``), mini-batches of ``--batch-size``, cross-entropy, in the batch
  order of :func:`epoch_orders` (numpy permutations from the seed, one per epoch);
* ``sl.train(method="equilibrium")``: the same optimiser, batches and epochs, at the default
  nudging, with symmetric nudging and at nudging 1 (the quasi-static limit of the paper's joint
  dynamics; ``--quasi-static-epochs`` shortens that slow row); rows the library refuses (graph
  networks before their equilibrium oracle) are skipped with its message;
* a control (``--rows perturbed``): torch again from the same weights and batches, every gradient entry
  multiplied by ``1 + 1e-5 N(0, 1)`` (the size of the equilibrium gradient's distance to backprop's),
  to show how far such a perturbation moves torch's own result;
* the paper's baselines: ``sl.train`` (forward-Euler joint dynamics, full batch, its defaults but
  ``steps`` and the seed of its random initial state) and ``sl.sgd`` (full-batch gradient descent,
  its defaults but ``epochs``).

Both libraries run in float64 with the same thread count (``--threads``; torch's own setting is
restored afterwards).  An *epoch* is one pass over the training set: a full-batch Euler or gradient
step is one.  Each row's clock covers its training and the per-epoch records the sheaflinalg history
makes (the forward passes for the train/test losses and accuracies); torch's clock includes the same
evaluation (its share is printed).  The table gives the test accuracy at the end, the seconds per
epoch, their ratio to torch's and the accuracy difference to torch after as many epochs (after its
last for the longer baselines); the figure (test accuracy against
epochs and against wall time, every method) is written to ``docs/img/mnist1d_training.png``.

An untimed warm-up on two batches comes first (numba's compilation stays out of every clock).
``--seeds 0 1 2 ...`` runs everything once per seed and prints the per-seed differences to torch with
their mean and spread, and draws ``docs/img/mnist1d_training_seeds.png``: a single seed cannot decide
a 1-point difference when torch differs from itself by several points under the control's noise.

Run: ``.venv/bin/python benchmarks/mnist1d_training.py [--quick] [--threads 1] [--arch mlp cnn]``
(``--quick``: one epoch or a few steps of everything, about a minute; ``--profile``: where each
equilibrium row's time goes).
"""

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import sheaflinalg as sl
from sheaflinalg._common.atomic import write_text
from sheaflinalg._common.threads import num_threads
from sheaflinalg.network.importers.torch_fx import import_torch
from sheaflinalg.plotting.figure import new_figure, save_figure
from sheaflinalg.reproduce import mnist1d_cnn
from sheaflinalg.training.losses import accuracy, loss_value
from sheaflinalg.training.train import METHODS

FIGURE = Path(__file__).resolve().parent.parent / "docs" / "img" / "mnist1d_training.png"
SEED_FIGURE = FIGURE.with_name("mnist1d_training_seeds.png")
MLP_DIMS = (40, 100, 100, 10)
INPUT_SHAPES = {"mlp": None, "cnn": (1, 40)}


# ----------------------------------------------------------------- shared initial weights and order
def torch_model(arch, seed):
    """The float64 torch model of ``arch`` ("mlp" or "cnn"), its weights drawn from ``seed``; returns logits.

    torch's global random state is forked, so the caller's is left as it was.
    """
    torch, nn = import_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if arch == "cnn":
            return mnist1d_cnn.build(torch, nn)
        layers = []
        for n_in, n_out in zip(MLP_DIMS[:-1], MLP_DIMS[1:]):
            layers += [nn.Linear(n_in, n_out), nn.ReLU()]
        return nn.Sequential(*layers[:-1]).to(torch.float64)


def softmax_network(model, arch):
    """``model`` imported with ``sl.Network.from_torch``, its output activation the softmax."""
    return sl.Network.from_torch(model, input_shape=INPUT_SHAPES[arch]).replace(output="softmax")


def torch_probabilities(model, X, arch):
    """Softmax of ``model``'s logits at the rows of ``X`` (float64 numpy), without gradients."""
    torch, _ = import_torch()
    Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))
    if INPUT_SHAPES[arch] is not None:
        Xt = Xt.reshape(X.shape[0], *INPUT_SHAPES[arch])
    with torch.no_grad():
        return torch.softmax(model(Xt), dim=1).numpy()


def forward_disagreement(model, net, X, arch):
    """Largest ``|softmax(torch(X)) - net.forward(X)|`` over the rows of ``X``."""
    return float(np.max(np.abs(torch_probabilities(model, X, arch) - net.forward(X))))


def epoch_orders(seed, n_samples, epochs):
    """The batch order of every epoch: ``epochs`` permutations of ``range(n_samples)`` from one numpy generator.

    Epoch ``e`` visits the samples in ``orders[e]``, cut into consecutive mini-batches (the last one
    partial when the batch size does not divide ``n_samples``).
    """
    rng = np.random.default_rng(seed)
    return [rng.permutation(n_samples) for _ in range(epochs)]


# ----------------------------------------------------------------- runs
@dataclass
class Curve:
    """One row: test accuracy at the records, against epochs (passes over the training set) and seconds."""

    method: str
    epochs: np.ndarray
    seconds: np.ndarray
    test_accuracy: np.ndarray
    note: str = ""
    torch_seconds_per_epoch: float = None     # torch's in the same run (set when runs are merged)

    @property
    def seconds_per_epoch(self):
        return self.seconds[-1] / self.epochs[-1]

    def to_json(self):
        return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, record):
        return cls(**{k: np.asarray(v, dtype=float) if isinstance(v, list) else v for k, v in record.items()})


@contextlib.contextmanager
def same_threads(threads):
    """``threads`` threads for torch (restored on exit) and for sheaflinalg (its :func:`num_threads`)."""
    torch, _ = import_torch()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with num_threads(threads):
            yield
    finally:
        torch.set_num_threads(before)


def _torch_records(model, data, arch):
    """What a sheaflinalg history records per epoch (train/test loss and accuracy), for torch's model.

    Returns the test accuracy; the other values are computed as the history does (the same cost).
    """
    values = []
    for X, Y in ((data.X_train, data.Y_train), (data.X_test, data.Y_test)):
        P = torch_probabilities(model, X, arch)
        values += [loss_value(P, Y, "cross_entropy", None, "softmax"), accuracy(P, Y, "softmax")]
    return values[-1]


def run_torch(model, data, arch, orders, lr, batch_size, noise=0.0):
    """Train ``model`` in place by torch backprop with Adam in the given batch order; its Curve.

    ``noise > 0`` multiplies every gradient entry by ``1 + noise * N(0, 1)`` (a seeded torch generator):
    the control row that shows how far a relative perturbation of that size moves torch's own curve.
    """
    torch, _ = import_torch()
    generator = torch.Generator().manual_seed(12345)
    X = torch.from_numpy(data.X_train)
    if INPUT_SHAPES[arch] is not None:
        X = X.reshape(X.shape[0], *INPUT_SHAPES[arch])
    labels = torch.from_numpy(data.Y_train.argmax(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    start = time.perf_counter()
    records = [(0, 0.0, _torch_records(model, data, arch))]
    evaluating = time.perf_counter() - start
    for epoch, order in enumerate(orders, 1):
        for first in range(0, len(order), batch_size):
            batch = torch.from_numpy(order[first:first + batch_size])
            loss = torch.nn.functional.cross_entropy(model(X[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            for p in model.parameters() if noise else ():
                p.grad.mul_(1.0 + noise * torch.randn(p.grad.shape, generator=generator, dtype=p.grad.dtype))
            optimizer.step()
        before = time.perf_counter()
        accuracy = _torch_records(model, data, arch)
        evaluating += time.perf_counter() - before
        records.append((epoch, time.perf_counter() - start, accuracy))
    epochs, seconds, accuracy = map(np.array, zip(*records))
    label = f"torch backprop (Adam), gradients x (1 + {noise:g} N(0,1))" if noise else "torch backprop (Adam)"
    return Curve(label, epochs, seconds, accuracy,
                 f"per-epoch evaluation {100 * evaluating / seconds[-1]:.0f}% of its time")


def history_curve(method, history, epochs_of, note=""):
    """The Curve of a sheaflinalg History; ``epochs_of`` names the series counting passes ("epoch" or "step")."""
    print(f"  {method}: test accuracy {history.test_accuracy[-1]:.3f} after {history.wall_time[-1]:.1f} s", flush=True)
    return Curve(method, np.asarray(getattr(history, epochs_of), dtype=float), np.asarray(history.wall_time),
                 np.asarray(history.test_accuracy, dtype=float), note)


#: The relative size of the ``perturbed`` row's gradient noise: that of the equilibrium gradient at the
#: default nudging (about ``14 * 1e-6``, docs/guide.md).
PERTURBATION = 1e-5

#: The ``sl.train(method="equilibrium")`` rows: ``--rows`` name, label, options.
EQUILIBRIUM_ROWS = (("default", "equilibrium, default nudging", {}),
                    ("symmetric", "equilibrium, symmetric nudging", {"symmetric": True}),
                    ("quasi-static", "equilibrium, nudging 1 (quasi-static)", {"nudging": 1.0}))


def equilibrium_rows(rows=("equilibrium",)):
    """``(label, options)`` of the equilibrium rows named in ``rows`` ("equilibrium": all; none before the method)."""
    if "equilibrium" not in METHODS:
        return []
    return [(label, options) for name, label, options in EQUILIBRIUM_ROWS if {name, "equilibrium"} & set(rows)]


def train_equilibrium(net, data, cfg, options, run=None, callback=None):
    """``sl.train(method="equilibrium")`` with the protocol of ``cfg`` (Adam, batches, epochs, seed, threads).

    ``run(fn, *args, **kwargs)`` calls it (default: directly; a profiler's ``runcall``).
    """
    return (run or (lambda fn, *a, **k: fn(*a, **k)))(
        sl.train, net, data.X_train, data.Y_train, data.X_test, data.Y_test, method="equilibrium",
        epochs=cfg.epochs, batch_size=cfg.batch_size, optimizer="adam", lr=cfg.lr, seed=cfg.seed, progress=False,
        blas_threads=cfg.threads, callback=callback, **options)


def equilibrium_curve(label, net, data, cfg, options):
    """The Curve of one equilibrium row; a run that raises keeps its epochs so far, the error in its note.

    None when the library refuses the network (graph networks before their equilibrium oracle).
    """
    seen = {}
    try:
        fit = train_equilibrium(net, data, cfg, options, callback=lambda info: seen.update(info=info))
    except sl.GraphNetworkError as exc:
        print(f"{label}: skipped ({exc})")
        return None
    except (RuntimeError, ValueError) as exc:   # reported in the table: where and why the run stopped
        if "info" not in seen:
            raise
        note = f"stopped in epoch {seen['info'].epoch + 1}: {exc}"
        print(f"  {label}: {note}", flush=True)
        return history_curve(label, seen["info"].history, "epoch", note)
    return history_curve(label, fit.history, "epoch")


def run_sheaf(net, data, cfg):
    """The sheaflinalg rows from ``net``: equilibrium training (same optimiser, order, epochs) and the baselines."""
    train_data = (net, data.X_train, data.Y_train, data.X_test, data.Y_test)
    curves = []
    for label, options in equilibrium_rows(cfg.rows):
        row_cfg = cfg if "nudging" not in options else dataclasses.replace(
            cfg, epochs=min(cfg.epochs, cfg.quasi_static_epochs))
        curve = equilibrium_curve(label, net, data, row_cfg, options)
        if curve is None:
            break
        curves.append(curve)
    if "baselines" not in cfg.rows:
        return curves
    steps = cfg.baseline_steps
    fit = sl.train(*train_data, steps=steps, epoch_steps=min(1000, steps), seed=cfg.seed, progress=False,
                   blas_threads=cfg.threads)
    curves.append(history_curve(f"sl.train Euler (defaults, {steps} full-batch steps)", fit.history, "step"))
    fit = sl.sgd(*train_data, epochs=steps, progress=False, blas_threads=cfg.threads)
    curves.append(history_curve(f"sl.sgd (full-batch GD, {steps} steps)", fit.history, "step"))
    return curves


def warm_up(arch, net, data, cfg):
    """One untimed epoch of every timed kind of row on two batches, so that no row's clock holds a
    one-time cost (numba compiles its kernels on first use after an install or a change; torch sets
    itself up); prints how long that took."""
    start = time.perf_counter()
    rows = slice(0, 2 * cfg.batch_size)
    small = dataclasses.replace(data, X_train=data.X_train[rows], Y_train=data.Y_train[rows],
                                X_test=data.X_test[rows], Y_test=data.Y_test[rows])
    run_torch(torch_model(arch, cfg.seed), small, arch, epoch_orders(cfg.seed, 2 * cfg.batch_size, 1), cfg.lr,
              cfg.batch_size)
    for _, options in equilibrium_rows(cfg.rows):
        with contextlib.suppress(sl.GraphNetworkError, RuntimeError, ValueError):
            train_equilibrium(net, small, dataclasses.replace(cfg, epochs=1), options)
    print(f"warm-up (untimed: compilation and set-up): {time.perf_counter() - start:.1f} s", flush=True)


def benchmark(arch, data, cfg):
    """All rows of one architecture: ``(torch curve, sheaflinalg curves)``; checks the shared start first."""
    model = torch_model(arch, cfg.seed)
    net = softmax_network(model, arch)
    gap = forward_disagreement(model, net, data.X_test, arch)
    if not gap < 1e-12:
        raise SystemExit(f"{arch}: the imported network's forward pass differs from torch's by {gap:.1e}")
    print(f"{arch}: {net!r}; forward passes agree to {gap:.1e} on the test set")
    orders = epoch_orders(cfg.seed, data.X_train.shape[0], cfg.epochs)
    with same_threads(cfg.threads):
        warm_up(arch, net, data, cfg)
        reference = run_torch(model, data, arch, orders, cfg.lr, cfg.batch_size)
        control = []
        if "perturbed" in cfg.rows:
            control.append(run_torch(torch_model(arch, cfg.seed), data, arch, orders, cfg.lr, cfg.batch_size,
                                     noise=PERTURBATION))
        return reference, control + run_sheaf(net, data, cfg)


# ----------------------------------------------------------------- where the time goes
#: Parts of an equilibrium run: (file path ending, function names).  Matches of one part nest (a
#: ``gradient`` calling ``settle``), so a part's time is the largest cumulative time among them.
PARTS = {"oracle": (("equilibrium/chain.py", "equilibrium/graph.py"), ("gradient",)),
         "settle": (("equilibrium/chain.py", "equilibrium/graph.py"), ("settle", "_settle")),
         "optimiser": (("training/optim/adam.py", "training/optim/optimizer.py"), ("step",)),
         "records": (("training/history.py",), ("record",))}


def time_split(stats, total):
    """Seconds of each part of an equilibrium run from ``pstats.Stats``: settle, velocity, optimiser, records, rest."""
    spent = dict.fromkeys(PARTS, 0.0)
    for (path, _, name), (_, _, _, cumulative, _) in stats.stats.items():
        for part, (files, names) in PARTS.items():
            if name in names and path.replace(os.sep, "/").endswith(files):
                spent[part] = max(spent[part], cumulative)
    velocity = spent["oracle"] - spent["settle"]
    rest = total - spent["oracle"] - spent["optimiser"] - spent["records"]
    return {"settle (pattern iteration and equilibrium solves)": spent["settle"],
            "weight velocity at the equilibrium": velocity, "optimiser step": spent["optimiser"],
            "history records (forward passes on train and test)": spent["records"],
            "the rest (batches, checks, loop)": rest}


def profile(net, data, cfg, options=None):
    """Run one equilibrium training of ``cfg`` under cProfile and print where its time goes."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    start = time.perf_counter()
    train_equilibrium(net, data, cfg, options or {}, run=prof.runcall)
    total = time.perf_counter() - start
    split = time_split(pstats.Stats(prof), total)
    print(f"{cfg.epochs} epochs under cProfile: {total:.2f} s; " +
          ", ".join(f"{part} {100 * t / total:.0f}%" for part, t in split.items()))
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)


# ----------------------------------------------------------------- report
def table(arch, reference, curves):
    """The PCX-style markdown table of one architecture (torch first)."""
    lines = [f"{arch}: | method | epochs | test accuracy | s / epoch | x torch | accuracy - torch | total s |",
             "|---|---|---|---|---|---|---|"]
    notes = [f"{c.method}: {c.note}" for c in curves if c.note]
    for c in [reference] + curves:
        acc, base_acc = c.test_accuracy[-1], torch_accuracy_at(reference, c.epochs[-1])
        base_time = c.torch_seconds_per_epoch or reference.seconds_per_epoch
        lines.append(f"| {c.method} | {c.epochs[-1]:.0f} | {100 * acc:.1f}% | {c.seconds_per_epoch:.4g} | "
                     f"{c.seconds_per_epoch / base_time:.2f} | {100 * (acc - base_acc):+.1f} | {c.seconds[-1]:.1f} |")
    return "\n".join(lines + notes)


def torch_accuracy_at(reference, epochs):
    """torch's test accuracy after ``epochs`` epochs (after its last when ``epochs`` is more)."""
    return reference.test_accuracy[min(int(epochs), len(reference.test_accuracy) - 1)]


def goals(arch, reference, curves):
    """Whether the issue's goal for ``arch`` is met by the default equilibrium row (a sentence)."""
    arch = arch.split("@")[0]
    rows = [c for c in curves if c.method.startswith("equilibrium, default")]
    if not rows:
        return f"{arch}: no equilibrium row"
    base_time = rows[0].torch_seconds_per_epoch or reference.seconds_per_epoch
    acc, ratio = rows[0].test_accuracy[-1], rows[0].seconds_per_epoch / base_time
    if arch == "mlp":
        met = acc >= reference.test_accuracy[-1] - 0.01 and ratio <= 2.0
        return (f"mlp goal (accuracy >= torch - 1 point, <= 2x its time per epoch): {100 * acc:.1f}% vs "
                f"{100 * reference.test_accuracy[-1]:.1f}%, {ratio:.2f}x: {'met' if met else 'not met'}")
    return f"cnn goal (>= 90%): {100 * acc:.1f}%: {'met' if acc >= 0.9 else 'not met'}"


def seed_summary(results):
    """The final test accuracies of every ``arch@seedN`` run side by side, with their means and spreads.

    Each row that is not torch's is given as its accuracy and its difference to torch's (same seed:
    same initial weights and batches); the last lines are the mean and the sample standard deviation
    over the seeds, the same for the mean accuracy over the last 10% of the epochs (:func:`tail_mean`),
    and the mean ratio of seconds per epoch to torch's.
    """
    by_arch = {}
    for key, (reference, curves) in results.items():
        if "@seed" in key:
            arch, seed = key.split("@seed")
            by_arch.setdefault(arch, []).append((int(seed), reference, curves))
    lines = []
    for arch, runs in by_arch.items():
        lines += [""] + _seed_table(arch, runs)
    return "\n".join(lines)


def _seed_table(arch, runs):
    """The lines of one architecture's :func:`seed_summary` (``runs``: ``(seed, torch curve, rows)``)."""
    names = [c.method for c in runs[0][2]]
    lines = [f"{arch}, {len(runs)} seeds: | seed | torch | " + " | ".join(f"{n} (- torch)" for n in names) + " |",
             "|---" * (2 + len(names)) + "|"]
    final = np.array([[r.test_accuracy[-1]] + [c.test_accuracy[-1] for c in curves] for _, r, curves in runs])
    late = np.array([[tail_mean(r)] + [tail_mean(c) for c in curves] for _, r, curves in runs])
    ratio = np.array([[c.seconds_per_epoch / r.seconds_per_epoch for c in curves] for _, r, curves in runs])
    for (seed, *_), acc in zip(runs, 100 * final):
        lines.append(f"| {seed} | {acc[0]:.1f}% | " + " | ".join(f"{a:.1f}% ({a - acc[0]:+.1f})" for a in acc[1:])
                     + " |")
    for label, acc in (("mean +- sd", 100 * final), ("mean of the last 10% of epochs", 100 * late)):
        diff = acc[:, 1:] - acc[:, :1]
        lines.append(f"| {label} | {acc[:, 0].mean():.1f} +- {_spread(acc)[0]:.1f}% | " + " | ".join(
            f"{m:.1f} +- {d:.1f}% ({dm:+.1f} +- {ds:.1f})"
            for m, d, dm, ds in zip(acc[:, 1:].mean(0), _spread(acc)[1:], diff.mean(0), _spread(diff))) + " |")
    lines.append("| s / epoch, x torch (mean) | 1.00 | " + " | ".join(f"{x:.2f}" for x in ratio.mean(0)) + " |")
    default = [i for i, name in enumerate(names) if name.startswith("equilibrium, default")]
    if default:
        lines.append(seed_goal(arch, final[:, 1 + default[0]], final[:, 0], ratio[:, default[0]]))
    return lines


def _spread(values):
    """The sample standard deviation over the seeds (axis 0); zeros for a single seed."""
    return values.std(0, ddof=1) if values.shape[0] > 1 else np.zeros(values.shape[1:])


def seed_goal(arch, accuracy, torch_accuracy, ratio):
    """The issue's goal judged over seeds (a sentence): for the MLP the mean accuracy difference to torch
    (same seeds) at least -1 point and the mean time ratio at most 2; for the CNN every seed at 90% or more."""
    if arch == "mlp":
        diff = 100 * float(np.mean(accuracy - torch_accuracy))
        met = diff >= -1.0 and float(np.mean(ratio)) <= 2.0
        return (f"mlp goal over {len(accuracy)} seeds (mean accuracy - torch's >= -1 point, <= 2x its time per "
                f"epoch): {diff:+.1f} points, {np.mean(ratio):.2f}x: {'met' if met else 'not met'}")
    return (f"cnn goal over {len(accuracy)} seeds (>= 90% on every seed): lowest {100 * accuracy.min():.1f}%: "
            f"{'met' if accuracy.min() >= 0.9 else 'not met'}")


def tail_mean(curve):
    """The mean test accuracy over the last 10% of a curve's epochs (at least one record): the end of a run
    with less of constant-rate Adam's epoch-to-epoch jitter than its last value."""
    n = max(1, int(round(0.1 * curve.epochs[-1])))
    return float(np.mean(curve.test_accuracy[-n:]))


def seed_figure(results, path):
    """Per architecture: every seed's test accuracy against epochs (left), and each row's difference to
    torch's of the same seed (right), so the equilibrium's gap is seen beside torch's own under noise."""
    runs = {}
    for key, (reference, curves) in results.items():
        runs.setdefault(key.split("@seed")[0], []).append((reference, curves))
    fig, axes = new_figure(len(runs), 2, figsize=(10, 3.6 * len(runs)), layout="constrained", squeeze=False)
    colours = {}
    for (arch, pairs), (left, right) in zip(runs.items(), axes):
        for first, (reference, curves) in enumerate(pairs):
            left.plot(reference.epochs, reference.test_accuracy, color="k", lw=0.8,
                      label="torch backprop (Adam)" if first == 0 else None)
            for c in curves:
                colour = colours.setdefault(c.method, f"C{len(colours)}")
                n = min(len(c.epochs), len(reference.epochs))
                label = c.method if first == 0 else None
                left.plot(c.epochs, c.test_accuracy, color=colour, lw=0.8, label=label)
                right.plot(c.epochs[:n], 100 * (c.test_accuracy[:n] - reference.test_accuracy[:n]), color=colour,
                           lw=0.8, label=label)
        right.axhline(0.0, color="k", lw=0.8)
        left.set(xlabel="epochs", ylabel="test accuracy", title=f"MNIST-1D, {arch}, {len(pairs)} seeds")
        right.set(xlabel="epochs", ylabel="test accuracy - torch's (points)", title="same seed, same batches")
        for ax in (left, right):
            ax.grid(alpha=0.3)
        right.legend(fontsize=7, loc="lower left")
    save_figure(fig, path)


def figure(results, path):
    """Test accuracy against epochs and against seconds, one row of panels per architecture."""
    fig, axes = new_figure(len(results), 2, figsize=(10, 3.6 * len(results)), layout="constrained", squeeze=False)
    for (arch, (reference, curves)), row in zip(results.items(), axes):
        for c in [reference] + curves:
            style = {"label": c.method, "lw": 2 if c is reference else 1.2, "color": "k" if c is reference else None}
            row[0].plot(c.epochs, c.test_accuracy, **style)
            row[1].plot(c.seconds, c.test_accuracy, **style)
        for ax, xlabel, linear in zip(row, ("epochs (passes over the training set)", "wall time (s)"), (1, 0.1)):
            ax.set_xscale("symlog", linthresh=linear)     # linear below ``linear``: the records at 0
            ax.set(xlabel=xlabel, ylabel="test accuracy", title=f"MNIST-1D, {arch}")
            ax.grid(alpha=0.3)
        row[1].legend(fontsize=7, loc="lower right")
    save_figure(fig, path)


def save_results(results, path):
    """Write every architecture's curves to the JSON file ``path`` (atomically), for :func:`merge_results`."""
    write_text(path, json.dumps({arch: [c.to_json() for c in [reference] + curves]
                                 for arch, (reference, curves) in results.items()}))


def merge_results(paths):
    """The curves of several runs saved by :func:`save_results`: ``{arch: (torch curve, rows)}``.

    torch's curve is the first run's (torch's accuracies are the same in every run: one seed, one
    order, one thread count); each row keeps the seconds per epoch of torch in its own run, and a row of
    a later run replaces a row of the same name.
    """
    merged = {}
    for path in paths:
        with open(path) as f:
            saved = json.load(f)
        for arch, records in saved.items():
            reference, *curves = map(Curve.from_json, records)
            for c in curves:
                c.torch_seconds_per_epoch = reference.seconds_per_epoch
            first, rows = merged.get(arch, (reference, {}))
            rows.update({c.method: c for c in curves})
            merged[arch] = (first, rows)
    return {arch: (reference, list(rows.values())) for arch, (reference, rows) in merged.items()}


def report(results, figure_path):
    """Print every architecture's table and goal; draw the figure to ``figure_path`` (when given)."""
    for arch, (reference, curves) in results.items():
        print()
        print(table(arch, reference, curves))
        print(f"torch: {reference.note}")
        print(goals(arch, reference, curves))
    seeds = {key: value for key, value in results.items() if "@seed" in key}
    if seeds:       # runs of several seeds: the summary, and their own figure (the single-run one is kept)
        print(seed_summary(seeds))
        results, draw = seeds, seed_figure
        figure_path = SEED_FIGURE if figure_path == str(FIGURE) else figure_path
    else:
        draw = figure
    if figure_path and results:
        draw(results, figure_path)
        print(f"figure: {figure_path}")


@dataclass
class Settings:
    """One architecture's protocol (shared by every row)."""

    epochs: int
    baseline_steps: int
    batch_size: int
    lr: float
    seed: int
    threads: int
    rows: tuple = ("equilibrium", "baselines")
    quasi_static_epochs: int = 10**9


def machine():
    """A line naming the machine, the load and the library versions."""
    torch, _ = import_torch()
    return (f"{platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"load {os.getloadavg()[0]:.2f}; python {platform.python_version()}, numpy {np.__version__}, "
            f"torch {torch.__version__}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few epochs and steps of everything (< 60 s)")
    p.add_argument("--arch", nargs="+", choices=("mlp", "cnn"), default=["mlp", "cnn"])
    p.add_argument("--threads", type=int, default=1, help="threads of both libraries (default 1)")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    p.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                   help="run every seed in turn (each its own initial weights and batch order) and print the "
                        "final accuracies side by side, with means and spreads (no figure)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--mlp-epochs", type=int, default=None, help="default 200 (--quick: 1)")
    p.add_argument("--cnn-epochs", type=int, default=None,
                   help="default 100, the protocol of reproduce/mnist1d_cnn (--quick: 1)")
    p.add_argument("--mlp-steps", type=int, default=None, help="Euler / GD baseline steps (default 5000; --quick 50)")
    p.add_argument("--cnn-steps", type=int, default=None, help="Euler / GD baseline steps (default 200; --quick 2)")
    p.add_argument("--quasi-static-epochs", type=int, default=None,
                   help="at most this many epochs for the nudging-1 row (default: all; --quick 1)")
    p.add_argument("--rows", nargs="+",
                   choices=("equilibrium", "baselines", "perturbed") + tuple(r[0] for r in EQUILIBRIUM_ROWS),
                   default=["equilibrium", "baselines"],
                   help="the rows besides torch's: equilibrium (all three, or some of default, symmetric, "
                        "quasi-static), baselines, and perturbed (torch with its gradients perturbed by "
                        f"{PERTURBATION:g} relative: how much such a change moves its curve); default: "
                        "equilibrium and baselines")
    p.add_argument("--profile", action="store_true",
                   help="instead of the table: where each equilibrium row's time goes (cProfile)")
    p.add_argument("--save", help="also write the curves to this JSON file")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="run nothing: the table and figure of runs saved with --save (later rows replace earlier)")
    p.add_argument("--figure", default=str(FIGURE), help="where to write the figure ('' for none)")
    args = p.parse_args(argv)
    quick = args.quick
    epochs = {"mlp": args.mlp_epochs or (1 if quick else 200), "cnn": args.cnn_epochs or (1 if quick else 100)}
    steps = {"mlp": args.mlp_steps or (50 if quick else 5000), "cnn": args.cnn_steps or (2 if quick else 200)}
    if args.merge:
        report(merge_results(args.merge), args.figure)
        return 0
    print(machine())
    print(f"command: {' '.join([Path(sys.argv[0]).name] + (sys.argv[1:] if argv is None else list(argv)))}")
    data = sl.tasks.mnist1d()
    results = {}
    for arch, seed in ((arch, seed) for arch in args.arch for seed in args.seeds or [args.seed]):
        cfg = Settings(epochs[arch], steps[arch], args.batch_size, args.lr, seed, args.threads, tuple(args.rows),
                       args.quasi_static_epochs or epochs[arch])
        if args.profile:
            with same_threads(cfg.threads):
                for label, options in equilibrium_rows():
                    print(f"{arch}, {label}:")
                    profile(softmax_network(torch_model(arch, cfg.seed), arch), data, cfg, options)
            continue
        results[f"{arch}@seed{seed}" if args.seeds else arch] = benchmark(arch, data, cfg)
    if args.save:
        save_results(results, args.save)
    report(results, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
