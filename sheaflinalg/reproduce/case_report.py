"""What the case studies share: a classifier of MNIST-1D trained (or kept), certified and analysed, and the
figure and tables every case study has (training and gap, groups by class and outcome, nodes, inputs).

A case study names its model (a ``build(torch, nn)`` function, :mod:`.backprop`), its :class:`Settings` per
mode and its grouping of node values (channels, heads: :func:`.case_analysis.analyse`'s ``groups``);
:func:`study` does the rest and returns a :class:`Study`, which its own figures and tables read.
"""

import csv
import io
import os
from dataclasses import dataclass

import numpy as np

from .. import tasks
from ..plotting.case_study import plot_channel_map, plot_groups, plot_node_profile, plot_training_record
from ..plotting.figure import new_figure
from ..sheaf.verification.verify import verify
from . import backprop
from .case_analysis import analyse, auc, choose_inputs
from .output import check_directory, table_texts

DATA_SEED = 42                      # the published MNIST-1D data set


@dataclass(frozen=True)
class Settings:
    """The sizes of one mode: data, training, inputs certified and analysed."""

    n_samples: int                  # MNIST-1D signals in all (80% training, 20% test)
    protocol: backprop.Protocol
    n_verify: int                   # test inputs certified
    per_class: int                  # correctly classified test inputs analysed per class
    n_wrong: int                    # misclassified test inputs analysed (at most)
    n_pinned: int                   # misclassified inputs pinned (the first ones; seconds each)
    max_iter: int = 100             # pattern updates of a pinned equilibrium (sl.discord.pinned)


def quartiles(v):
    """Median, first and third quartile of ``v`` (NaN when it is empty).

    Examples
    --------
    >>> [float(q) for q in quartiles([1.0, 2.0, 3.0])]
    [2.0, 1.5, 2.5]
    """
    if not np.size(v):
        return (np.nan,) * 3
    lo, med, hi = np.percentile(v, [25, 50, 75])
    return med, lo, hi


@dataclass
class Study:
    """Everything the figures and tables of a case study read."""

    settings: Settings
    record: dict            # training record (backprop.train)
    network: object
    accuracy: float         # the imported network's test accuracy
    certified: tuple        # (inputs passed, inputs verified, largest |harmonic - forward|)
    analysis: object        # CaseAnalysis
    paths: list             # the network file and its record, relative to the output root
    data: object            # the MNIST-1D data set


def trained_case(root, s, name, build, progress=False):
    """``(network, record, data)``: the MNIST-1D data set of the settings ``s`` and the model ``build`` trained on
    it, or the network kept at ``root/networks/<name>.npz`` when it was trained the same way."""
    data = tasks.mnist1d(seed=DATA_SEED, n_samples=s.n_samples)
    check_directory(os.path.join(root, "networks"), "out")
    net, record = backprop.trained(os.path.join(root, "networks", f"{name}.npz"), data, build, s.protocol,
                                   {"seed": DATA_SEED, "n_samples": s.n_samples}, name, progress)
    return net, record, data


def study(outputs, s, name, build, groups, progress=False):
    """Data, training (or the kept network ``networks/<name>.npz``), certificate and analysis: the :class:`Study`
    of the settings ``s``; ``build`` makes the untrained model, ``groups`` groups node values (:func:`analyse`)."""
    net, record, data = trained_case(outputs.root, s, name, build, progress)
    rel = os.path.join("networks", f"{name}.npz")
    labels = data.Y_test.argmax(axis=1)
    predicted = backprop.predictions(net, data.X_test)
    report = verify(net, data.X_test[:s.n_verify])
    certified = (int(np.sum(report.det_certificate & (report.max_deviation <= report.tol))), s.n_verify,
                 float(report.max_deviation.max()))
    index = choose_inputs(labels, predicted, s.per_class, s.n_wrong)
    analysis = analyse(net, data.X_test, data.Y_test, index, s.n_pinned, groups, s.max_iter)
    return Study(s, record, net, float(np.mean(labels == predicted)), certified, analysis, [rel, rel + ".json"], data)


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


def _summed(parts, rows):
    """``{row: the sum of parts[node] over its nodes}`` for ``rows = {row: [node, ...]}``."""
    return {row: sum(parts[n] for n in nodes) for row, nodes in rows.items()}


def profile_figure(a, columns, rows, xlabel, where):
    """Top: the Fiedler vector's energy per group of nodes (correct vs misclassified) and per channel or head.
    Bottom: the pinned discord of the settled pinned inputs (output pinned to the true label), the same way.

    ``columns = {name: [node, ...]}`` are the profile's groups of nodes (a node alone, a sub-layer);
    ``rows = {name: [node, ...]}`` the heat map's rows, each the sum of the nodes' grouped values
    (:attr:`CaseAnalysis.channel_energy`), whose index is ``xlabel`` (``"channel"``, ``"head"``).
    """
    fig, axes = new_figure(2, 2, figsize=(14, 8), gridspec_kw={"width_ratios": [1, 1.3]})
    d = a.discord[a.settled]

    def summed(values, names, nodes):
        return values[:, [names.index(n) for n in nodes]].sum(axis=1)

    def mean(parts):
        return {row: v.mean(axis=0) if v.shape[0] else np.zeros(v.shape[1]) for row, v in _summed(parts, rows).items()}

    energy = np.stack([summed(a.energy, a.nodes, nodes) for nodes in columns.values()], axis=1)
    discord = np.stack([summed(d, a.edges, nodes) for nodes in columns.values()], axis=1)
    for row, (groups, colours, parts, what, inputs) in enumerate((
            (a.outcome_groups(energy), ("C0", "C3"), a.channel_energy, r"energy of the $\lambda_1$ eigenvector",
             "the analysed inputs"),
            ({"misclassified, pinned": discord}, ("C3",), {n: v[a.settled] for n, v in a.channel_discord.items()},
             r"pinned discord $\frac{1}{2}\|r_e\|^2$", "the settled pinned inputs"))):
        plot_node_profile(list(columns), groups, ax=axes[row, 0], log=True, ylabel=what, colours=colours)
        axes[row, 0].set_title("median and quartiles")
        plot_channel_map(mean(parts), ax=axes[row, 1], log=True, label=f"mean {what}", xlabel=xlabel)
        axes[row, 1].set_title(f"{where}, mean over {inputs}")
    fig.tight_layout()
    return fig


def mann_whitney_p(x, y):
    """Two-sided p-value of the Mann-Whitney U test of ``x`` against ``y`` (NaN if one is empty).

    Examples
    --------
    >>> round(mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), 3)
    0.1
    """
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(x, y, alternative="two-sided").pvalue) if np.size(x) and np.size(y) else np.nan


def summary_rows(st):
    """``[quantity, value]`` rows of the headline numbers every case study has."""
    a, passed = st.analysis, st.certified
    total = a.discord.sum(axis=1)
    rows = [["test accuracy (imported network, all test inputs)", st.accuracy],
            ["test accuracy (torch, after the last epoch)", st.record["test_accuracy"][-1]],
            ["training time (s)", st.record["seconds"]],
            ["certified inputs (det = 1 and harmonic = forward)", f"{passed[0]}/{passed[1]}"],
            ["largest deviation of the harmonic extension from the forward pass (relative)", passed[2]],
            ["analysed inputs: correct, misclassified", f"{int(a.correct.sum())}, {int((~a.correct).sum())}"],
            ["pinned equilibria settled (the first misclassified inputs)", f"{int(a.settled.sum())}/{a.settled.size}"],
            ["of them on a switching surface (Filippov)", int(np.sum(a.sliding > 0))]]
    for group, mask in (("correct", a.correct), ("misclassified", ~a.correct)):
        rows.append([f"median lambda_1, {group}", quartiles(a.lambda_min[mask])[0]])
    rows.append(["AUC of lambda_1 (misclassified above correct; 0.5: no separation)",
                 auc(a.lambda_min[~a.correct], a.lambda_min[a.correct])])
    rows.append(["Mann-Whitney p of lambda_1, correct vs misclassified (two-sided)",
                 mann_whitney_p(a.lambda_min[~a.correct], a.lambda_min[a.correct])])
    rows.append(["median total pinned discord, settled pinned inputs", quartiles(total[a.settled])[0]])
    return rows


def group_rows(a):
    """Per class (true label) and per outcome: inputs, misclassified ones, ``lambda_1`` quartiles, and the
    median total pinned discord of the settled pinned (misclassified) inputs."""
    total = a.discord.sum(axis=1)[a.settled]
    wrong_labels = a.labels[a.pinned][a.settled]
    groups = [(f"class {c}", a.labels == c, wrong_labels == c) for c in range(10)]
    groups += [("correct", a.correct, np.zeros_like(wrong_labels, dtype=bool)),
               ("misclassified", ~a.correct, np.ones_like(wrong_labels, dtype=bool))]
    return [[name, int(mask.sum()), int((mask & ~a.correct).sum()), *quartiles(a.lambda_min[mask]),
             quartiles(total[w])[0]] for name, mask, w in groups]


GROUP_HEADER = ["group", "inputs", "misclassified", "lambda_1 median", "lambda_1 q25", "lambda_1 q75",
                "total pinned discord median (settled pinned inputs)"]


def shares(a, columns):
    """``{name: (median Fiedler energy (correct), (misclassified), median pinned discord, share of the pinned
    discord)}`` of groups of nodes ``columns`` (``{name: [node, ...]}``), over the settled pinned inputs."""
    d = a.discord[a.settled]
    total = d.sum()
    out = {}
    for name, nodes in columns.items():
        e = a.energy[:, [a.nodes.index(n) for n in nodes]].sum(axis=1)
        p = d[:, [a.edges.index(n) for n in nodes]].sum(axis=1)
        out[name] = (quartiles(e[a.correct])[0], quartiles(e[~a.correct])[0], quartiles(p)[0],
                     p.sum() / total if total > 0 else np.nan)
    return out


SHARE_HEADER = ["Fiedler energy (correct)", "Fiedler energy (misclassified)", "pinned discord (settled pinned)",
                "share of the pinned discord"]


def node_rows(a, graph):
    """Per node: shape, median Fiedler energy (correct, misclassified inputs), pinned discord of the settled
    pinned inputs (median, and the node's share of the total summed over them)."""
    return [[name, "x".join(map(str, graph.shapes[name])), *row]
            for name, row in shares(a, {n: [n] for n in a.nodes}).items()]


def inputs_csv(a):
    """One row per analysed input: its test index, label, prediction, ``lambda_1``, ``lambda_max``, the Fiedler
    energy per node and, for a pinned (misclassified) input, the total pinned discord (else empty) and whether its
    pinned equilibrium settled."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["test_index", "label", "predicted", "lambda_min", "lambda_max"]
                    + [f"energy_{n}" for n in a.nodes] + ["pinned_discord", "pinned_settled"])
    total = dict(zip(a.pinned.tolist(), zip(a.discord.sum(axis=1).tolist(), a.settled.tolist())))
    for i in range(a.labels.size):
        pin = [repr(total[i][0]), int(total[i][1])] if i in total else ["", ""]
        writer.writerow([int(a.index[i]), int(a.labels[i]), int(a.predicted[i]), repr(float(a.lambda_min[i])),
                         repr(float(a.lambda_max[i]))] + [repr(float(e)) for e in a.energy[i]] + pin)
    return buf.getvalue()


def common_outputs(outputs, st, key):
    """The outputs every case study writes under the prefix ``key``: the gap figure, the inputs' CSV, the table of
    groups; the paths, after the network's."""
    a = st.analysis
    paths = list(st.paths)
    paths += outputs.figure(gap_figure(a, st.record), f"{key}_gap")
    paths += outputs.text(os.path.join("tables", f"{key}_inputs.csv"), inputs_csv(a))
    paths += outputs.table(f"{key}_groups", *table_texts(GROUP_HEADER, group_rows(a)))
    return paths


def notes(st):
    """The one-line notes of a case study's item."""
    a, ok = st.analysis, st.analysis.correct
    return (f"test accuracy {st.accuracy:.3f}; certified {st.certified[0]}/{st.certified[1]}; median lambda_1 "
            f"{quartiles(a.lambda_min[ok])[0]:.3g} (correct) vs {quartiles(a.lambda_min[~ok])[0]:.3g} "
            f"(misclassified), AUC {auc(a.lambda_min[~ok], a.lambda_min[ok]):.2f}")
