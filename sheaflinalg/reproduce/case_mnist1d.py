"""Case study: the sheaf of a trained MNIST-1D CNN (beyond the paper).

The MNIST-1D data (generated offline, :func:`sheaflinalg.tasks.mnist1d`), the MNIST-1D paper's CNN
trained by backpropagation in PyTorch (:mod:`.mnist1d_cnn`), imported as a graph network and
certified (``det delta_Omega = 1``, harmonic extension = forward pass), then the diagnostics of
:mod:`.case_analysis` on chosen test inputs: the spectral gap per class and for correct vs
misclassified inputs, where the Fiedler vector's energy sits node by node and channel by channel,
and the pinned discord per node and channel.  Figures, tables and the trained network go to the
output directory; the network is reused by a rerun (``networks/``).
"""

import os
from dataclasses import dataclass

import numpy as np

from .. import tasks
from ..plotting.case_study import plot_channel_map, plot_groups, plot_node_profile, plot_training_record
from ..plotting.figure import new_figure
from ..sheaf.verify import verify
from . import mnist1d_cnn
from .case_analysis import analyse, choose_inputs
from .output import check_directory, table_texts

DATA_SEED = 42                      # the published MNIST-1D data set


@dataclass(frozen=True)
class Settings:
    """The sizes of one mode: data, training, inputs certified and analysed."""

    n_samples: int                  # MNIST-1D signals in all (80% training, 20% test)
    protocol: mnist1d_cnn.Protocol
    n_verify: int                   # test inputs certified
    per_class: int                  # correctly classified test inputs analysed per class
    n_wrong: int                    # misclassified test inputs analysed (at most)


SETTINGS = {False: Settings(5000, mnist1d_cnn.Protocol(epochs=100), 20, 20, 100),
            True: Settings(500, mnist1d_cnn.Protocol(epochs=10), 3, 2, 10)}


def _stats(v):
    """Median, first and third quartile of ``v`` (NaN when it is empty)."""
    if not np.size(v):
        return (np.nan,) * 3
    lo, med, hi = np.percentile(v, [25, 50, 75])
    return med, lo, hi


@dataclass
class Study:
    """Everything the figures and tables of the case study read."""

    settings: Settings
    record: dict            # training record (mnist1d_cnn.train)
    network: object
    accuracy: float         # the imported network's test accuracy
    certified: tuple        # (inputs passed, inputs verified, largest |harmonic - forward|)
    analysis: object        # CaseAnalysis
    paths: list             # the network file and its record, relative to the output root


def study(outputs, quick, progress=False):
    """Data, training (or the kept network), certificate and analysis: the :class:`Study` of a mode."""
    s = SETTINGS[quick]
    data = tasks.mnist1d(seed=DATA_SEED, n_samples=s.n_samples)
    check_directory(outputs.path("networks"), "out")
    rel = os.path.join("networks", f"mnist1d_cnn_{'quick' if quick else 'full'}.npz")
    net, record = mnist1d_cnn.trained(outputs.path(rel), data, s.protocol,
                                      {"seed": DATA_SEED, "n_samples": s.n_samples}, progress)
    labels = data.Y_test.argmax(axis=1)
    predicted = mnist1d_cnn.predictions(net, data.X_test)
    report = verify(net, data.X_test[:s.n_verify])
    certified = (int(np.sum(report.det_certificate & (report.max_deviation <= report.tol))), s.n_verify,
                 float(report.max_deviation.max()))
    index = choose_inputs(labels, predicted, s.per_class, s.n_wrong)
    analysis = analyse(net, data.X_test, data.Y_test, index)
    return Study(s, record, net, float(np.mean(labels == predicted)), certified, analysis, [rel, rel + ".json"])


def gap_figure(a):
    """``lambda_1`` per true class (correctly classified inputs) and for correct vs misclassified inputs."""
    fig, axes = new_figure(1, 2, figsize=(12, 4), sharey=True, gridspec_kw={"width_ratios": [3, 1]})
    ok = a.correct
    plot_groups({str(c): a.lambda_min[ok & (a.labels == c)] for c in range(10)}, ax=axes[0],
                ylabel=r"spectral gap $\lambda_1$")
    axes[0].set_xlabel("true class (correctly classified test inputs)")
    plot_groups(a.outcome_groups(a.lambda_min), ax=axes[1], colours=("C0", "C3"))
    axes[1].set_title("all analysed inputs")
    fig.tight_layout()
    return fig


def _profile_figure(nodes, groups, channels, ylabel, channel_label, channel_title):
    """A per-node profile by group (left) beside a per-channel heat map of the feature maps (right)."""
    fig, axes = new_figure(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1, 1.3]})
    plot_node_profile(nodes, groups, ax=axes[0], log=True, ylabel=ylabel)
    axes[0].set_title("median and quartiles")
    plot_channel_map(channels, ax=axes[1], log=True, label=channel_label)
    axes[1].set_title(channel_title)
    fig.tight_layout()
    return fig


def energy_figure(a):
    """The Fiedler vector's energy node by node (correct vs misclassified) and channel by channel."""
    return _profile_figure(a.nodes, a.outcome_groups(a.energy),
                           {n: e.mean(axis=0) for n, e in a.channel_energy.items()},
                           r"energy of the $\lambda_1$ eigenvector per node", "mean energy",
                           "per channel of the feature maps, mean over the analysed inputs")


def discord_figure(a):
    """Pinned discord (output pinned to the true label) per edge and, for misclassified inputs, per channel."""
    shown = ~a.correct if (~a.correct).any() else a.correct
    return _profile_figure(a.edges, a.outcome_groups(a.discord),
                           {n: d[shown].mean(axis=0) for n, d in a.channel_discord.items()},
                           r"pinned discord $\frac{1}{2}\|r_e\|^2$ per edge", "mean pinned discord",
                           f"per channel, mean over the {'misclassified' if (~a.correct).any() else 'correct'} "
                           "inputs")


def training_figure(record):
    fig, ax = new_figure(figsize=(6, 3.5))
    plot_training_record(record["train_loss"], record["test_accuracy"], ax=ax)
    ax.set_title(f"MNIST-1D CNN, Adam, {len(record['train_loss'])} epochs ({record['seconds']:.0f} s)")
    fig.tight_layout()
    return fig


def summary_rows(st):
    """``[quantity, value]`` rows of the headline numbers."""
    a, passed = st.analysis, st.certified
    total = a.discord.sum(axis=1)
    rows = [["test accuracy (imported network, all test inputs)", st.accuracy],
            ["test accuracy (torch, after the last epoch)", st.record["test_accuracy"][-1]],
            ["training time (s)", st.record["seconds"]],
            ["certified inputs (det = 1 and harmonic = forward)", f"{passed[0]}/{passed[1]}"],
            ["largest |harmonic - forward| (relative)", passed[2]],
            ["analysed inputs: correct, misclassified", f"{int(a.correct.sum())}, {int((~a.correct).sum())}"],
            ["pinned equilibria settled", f"{int(a.settled.sum())}/{a.settled.size}"]]
    for group, mask in (("correct", a.correct), ("misclassified", ~a.correct)):
        rows.append([f"median lambda_1, {group}", _stats(a.lambda_min[mask])[0]])
        rows.append([f"median total pinned discord, {group}", _stats(total[mask])[0]])
    return rows


def group_rows(a):
    """Per class (true label) and per outcome: inputs, ``lambda_1`` quartiles, median total pinned discord."""
    total = a.discord.sum(axis=1)
    groups = [(f"class {c}", a.labels == c) for c in range(10)]
    groups += [("correct", a.correct), ("misclassified", ~a.correct)]
    return [[name, int(mask.sum()), *_stats(a.lambda_min[mask]), _stats(total[mask])[0]] for name, mask in groups]


def node_rows(a, graph):
    """Per node: shape, median Fiedler energy and median pinned discord for correct and misclassified inputs."""
    rows = []
    for name in a.edges:
        e = a.energy[:, a.nodes.index(name)] if name in a.nodes else np.full(a.labels.shape, np.nan)
        d = a.discord[:, a.edges.index(name)]
        shape = "x".join(map(str, graph.shapes[name])) if name in graph.shapes else "output"
        rows.append([name, shape] + [_stats(v[m])[0] for v in (e, d) for m in (a.correct, ~a.correct)])
    return rows


def case_mnist1d(outputs, quick, progress=False):
    """The case study item: figures, tables and the trained network; the headline numbers as notes."""
    st = study(outputs, quick, progress)
    a = st.analysis
    paths = list(st.paths)
    for fig, stem in ((training_figure(st.record), "case_mnist1d_training"), (gap_figure(a), "case_mnist1d_gap"),
                      (energy_figure(a), "case_mnist1d_fiedler"), (discord_figure(a), "case_mnist1d_discord")):
        paths += outputs.figure(fig, stem)
    paths += outputs.table("case_mnist1d_summary", *table_texts(["quantity", "value"], summary_rows(st)))
    paths += outputs.table("case_mnist1d_groups", *table_texts(
        ["group", "inputs", "lambda_1 median", "lambda_1 q25", "lambda_1 q75", "total pinned discord median"],
        group_rows(a)))
    paths += outputs.table("case_mnist1d_nodes", *table_texts(
        ["node", "shape", "Fiedler energy (correct)", "Fiedler energy (misclassified)", "pinned discord (correct)",
         "pinned discord (misclassified)"], node_rows(a, st.network.graph)))
    ok = a.correct
    notes = (f"test accuracy {st.accuracy:.3f}; certified {st.certified[0]}/{st.certified[1]}; median lambda_1 "
             f"{_stats(a.lambda_min[ok])[0]:.3g} (correct) vs {_stats(a.lambda_min[~ok])[0]:.3g} (misclassified)")
    return paths, notes
