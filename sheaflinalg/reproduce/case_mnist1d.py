"""Case study: the sheaf of a trained MNIST-1D CNN (beyond the paper).

The MNIST-1D data (generated offline, :func:`sheaflinalg.tasks.mnist1d`), the MNIST-1D paper's CNN
trained by backpropagation in PyTorch (:mod:`.mnist1d_cnn`), imported as a graph network and
certified (``det delta_Omega = 1``, harmonic extension = forward pass), then the diagnostics of
:mod:`.case_analysis` on chosen test inputs: the spectral gap per class and for correct vs
misclassified inputs, where the Fiedler vector's energy sits node by node and channel by channel,
and the pinned discord per node and channel.  Figures, tables and the trained network go to the
output directory; the network is reused by a rerun (``networks/``).
"""

import csv
import io
import os
from dataclasses import dataclass

import numpy as np

from .. import tasks
from ..network.graph.forward import evaluate
from ..network.ops import MASK
from ..plotting.case_study import plot_channel_map, plot_groups, plot_node_profile, plot_training_record
from ..plotting.figure import new_figure
from ..sheaf.verification.verify import verify
from . import mnist1d_cnn
from .case_analysis import analyse, choose_inputs, feature_maps
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
    n_pinned: int                   # misclassified inputs pinned (the first ones; seconds each)


SETTINGS = {False: Settings(5000, mnist1d_cnn.Protocol(epochs=100), 20, 20, 100, 24),
            True: Settings(500, mnist1d_cnn.Protocol(epochs=10), 2, 1, 3, 3)}


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
    dead: dict              # {relu node: its channels active on no test input}
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
    analysis = analyse(net, data.X_test, data.Y_test, index, s.n_pinned)
    return Study(s, record, net, float(np.mean(labels == predicted)), certified, analysis,
                 dead_channels(net, data.X_test), [rel, rel + ".json"])


def dead_channels(net, X):
    """``{rectifier node: number of its channels active on no input of X}`` for the feature-map rectifiers."""
    pattern = evaluate(net.graph, X).pattern
    maps = feature_maps(net.graph)
    return {n: int((~pattern[n].reshape(X.shape[0], net.graph.shapes[n][0], -1).any(axis=(0, 2))).sum())
            for n in net.graph.pattern_nodes if n in maps and net.graph.node(n).rule.pattern is MASK}


def gap_figure(a, record):
    """Training curves; ``lambda_1`` per true class (correctly classified inputs) and by outcome."""
    fig, axes = new_figure(1, 3, figsize=(16, 4), gridspec_kw={"width_ratios": [1.3, 2.2, 0.8]})
    plot_training_record(record["train_loss"], record["test_accuracy"], ax=axes[0])
    axes[0].set_title(f"Adam, {len(record['train_loss'])} epochs")
    ok = a.correct
    plot_groups({str(c): a.lambda_min[ok & (a.labels == c)] for c in range(10)}, ax=axes[1],
                ylabel=r"spectral gap $\lambda_1$")
    axes[1].set_xlabel("true class (correctly classified test inputs)")
    plot_groups(a.outcome_groups(a.lambda_min), ax=axes[2], colours=("C0", "C3"))
    axes[2].set_ylim(axes[1].get_ylim())
    axes[2].set_title("by outcome")
    fig.tight_layout()
    return fig


def nodes_figure(a):
    """Top: the Fiedler vector's energy per node (correct vs misclassified) and per channel.  Bottom: the
    pinned discord of the misclassified inputs (output pinned to the true label) per edge and per channel."""
    fig, axes = new_figure(2, 2, figsize=(14, 8), gridspec_kw={"width_ratios": [1, 1.3]})
    wrong = {n: d.mean(axis=0) if d.size else np.zeros(d.shape[1]) for n, d in a.channel_discord.items()}
    for row, (nodes, groups, colours, channels, what, where) in enumerate((
            (a.nodes, a.outcome_groups(a.energy), ("C0", "C3"),
             {n: e.mean(axis=0) for n, e in a.channel_energy.items()}, r"energy of the $\lambda_1$ eigenvector",
             "the analysed inputs"),
            (a.edges, {"misclassified, pinned": a.discord}, ("C3",), wrong, r"pinned discord $\frac{1}{2}\|r_e\|^2$",
             "the pinned misclassified inputs"))):
        plot_node_profile(nodes, groups, ax=axes[row, 0], log=True, ylabel=what, colours=colours)
        axes[row, 0].set_title("per node: median and quartiles")
        plot_channel_map(channels, ax=axes[row, 1], log=True, label=f"mean {what}")
        axes[row, 1].set_title(f"per channel of the feature maps, mean over {where}")
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
            ["largest deviation of the harmonic extension from the forward pass (relative)", passed[2]],
            ["analysed inputs: correct, misclassified", f"{int(a.correct.sum())}, {int((~a.correct).sum())}"],
            ["pinned equilibria settled (the first misclassified inputs)", f"{int(a.settled.sum())}/{a.settled.size}"],
            ["of them on a switching surface (Filippov)", int(np.sum(a.sliding > 0))],
            ["ReLU channels active on no test input (" + ", ".join(st.dead) + ")",
             ", ".join(f"{v}/{st.network.graph.shapes[n][0]}" for n, v in st.dead.items())]]
    for group, mask in (("correct", a.correct), ("misclassified", ~a.correct)):
        rows.append([f"median lambda_1, {group}", _stats(a.lambda_min[mask])[0]])
    rows.append(["median total pinned discord, pinned misclassified inputs", _stats(total)[0]])
    return rows


def group_rows(a):
    """Per class (true label) and per outcome: inputs, misclassified ones, ``lambda_1`` quartiles, and the
    median total pinned discord of the pinned (misclassified) inputs."""
    total = a.discord.sum(axis=1)
    wrong_labels = a.labels[a.pinned]
    groups = [(f"class {c}", a.labels == c, wrong_labels == c) for c in range(10)]
    groups += [("correct", a.correct, np.zeros_like(wrong_labels, dtype=bool)),
               ("misclassified", ~a.correct, np.ones_like(wrong_labels, dtype=bool))]
    return [[name, int(mask.sum()), int((mask & ~a.correct).sum()), *_stats(a.lambda_min[mask]), _stats(total[w])[0]]
            for name, mask, w in groups]


def node_rows(a, graph):
    """Per node: shape, median Fiedler energy (correct, misclassified inputs), pinned discord of the
    misclassified inputs (median, and the node's share of the total summed over them)."""
    total = a.discord.sum()
    rows = []
    for j, name in enumerate(a.nodes):
        e = a.energy[:, j]
        d = a.discord[:, a.edges.index(name)]
        rows.append([name, "x".join(map(str, graph.shapes[name])), _stats(e[a.correct])[0], _stats(e[~a.correct])[0],
                     _stats(d)[0], d.sum() / total if total > 0 else np.nan])
    return rows


def inputs_csv(a):
    """One row per analysed input: its test index, label, prediction, ``lambda_1``, ``lambda_max``, the Fiedler
    energy per node and, for a pinned (misclassified) input, the total pinned discord (else empty)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["test_index", "label", "predicted", "lambda_min", "lambda_max"]
                    + [f"energy_{n}" for n in a.nodes] + ["pinned_discord"])
    total = dict(zip(a.pinned.tolist(), a.discord.sum(axis=1).tolist()))
    for i in range(a.labels.size):
        writer.writerow([int(a.index[i]), int(a.labels[i]), int(a.predicted[i]), repr(float(a.lambda_min[i])),
                         repr(float(a.lambda_max[i]))] + [repr(float(e)) for e in a.energy[i]]
                        + [repr(total[i]) if i in total else ""])
    return buf.getvalue()


def case_mnist1d(outputs, quick, progress=False):
    """The case study item: figures, tables and the trained network; the headline numbers as notes."""
    st = study(outputs, quick, progress)
    a = st.analysis
    paths = list(st.paths)
    paths += outputs.figure(gap_figure(a, st.record), "case_mnist1d_gap")
    paths += outputs.figure(nodes_figure(a), "case_mnist1d_nodes")
    paths += outputs.text(os.path.join("tables", "case_mnist1d_inputs.csv"), inputs_csv(a))
    paths += outputs.table("case_mnist1d_summary", *table_texts(["quantity", "value"], summary_rows(st)))
    paths += outputs.table("case_mnist1d_groups", *table_texts(
        ["group", "inputs", "misclassified", "lambda_1 median", "lambda_1 q25", "lambda_1 q75",
         "total pinned discord median (pinned inputs)"],
        group_rows(a)))
    paths += outputs.table("case_mnist1d_nodes", *table_texts(
        ["node", "shape", "Fiedler energy (correct)", "Fiedler energy (misclassified)",
         "pinned discord (pinned inputs)", "share of the pinned discord"], node_rows(a, st.network.graph)))
    ok = a.correct
    notes = (f"test accuracy {st.accuracy:.3f}; certified {st.certified[0]}/{st.certified[1]}; median lambda_1 "
             f"{_stats(a.lambda_min[ok])[0]:.3g} (correct) vs {_stats(a.lambda_min[~ok])[0]:.3g} (misclassified)")
    return paths, notes
