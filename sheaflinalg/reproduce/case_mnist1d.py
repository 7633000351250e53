"""Case study: the sheaf of a trained MNIST-1D CNN (beyond the paper).

The MNIST-1D data (generated offline, :func:`sheaflinalg.tasks.mnist1d`), the MNIST-1D paper's CNN
trained by backpropagation in PyTorch (:mod:`.mnist1d_cnn`), imported as a graph network and
certified (``det delta_Omega = 1``, harmonic extension = forward pass), then the diagnostics of
:mod:`.case_analysis` on chosen test inputs: the spectral gap per class and for correct vs
misclassified inputs, where the Fiedler vector's energy sits node by node and channel by channel,
and the pinned discord per node and channel.  Figures, tables and the trained network go to the
output directory; the network is reused by a rerun (``networks/``).  What the case studies share is
in :mod:`.case_report`.
"""

from ..network.graph.forward import evaluate
from ..network.ops import MASK
from . import mnist1d_cnn
from .case_analysis import feature_maps
from .case_report import (DATA_SEED, SHARE_HEADER, Settings, common_outputs, node_rows, notes, profile_figure, study,
                          summary_rows, trained_case)
from .output import table_texts

__all__ = ["DATA_SEED", "SETTINGS", "case_mnist1d", "case_network"]

SETTINGS = {False: Settings(5000, mnist1d_cnn.Protocol(epochs=100), 20, 20, 100, 24),
            True: Settings(500, mnist1d_cnn.Protocol(epochs=10), 2, 1, 3, 3)}


def case_network(root, quick=False, progress=False):
    """``(network, data)``: the case study's trained CNN, kept at ``root/networks/`` (where ``sheaflinalg
    reproduce case_mnist1d --out ROOT`` keeps it) or trained there now, and its MNIST-1D data set."""
    net, _, data = trained_case(root, SETTINGS[quick], f"mnist1d_cnn_{'quick' if quick else 'full'}",
                                mnist1d_cnn.build, progress)
    return net, data


def dead_channels(net, X):
    """``{rectifier node: number of its channels active on no input of X}`` for the feature-map rectifiers."""
    pattern = evaluate(net.graph, X).pattern
    maps = feature_maps(net.graph)
    return {n: int((~pattern[n].reshape(X.shape[0], net.graph.shapes[n][0], -1).any(axis=(0, 2))).sum())
            for n in net.graph.pattern_nodes if n in maps and net.graph.node(n).rule.pattern is MASK}


def case_mnist1d(outputs, quick, progress=False):
    """The case study item: figures, tables and the trained network; the headline numbers as notes."""
    st = study(outputs, SETTINGS[quick], f"mnist1d_cnn_{'quick' if quick else 'full'}", mnist1d_cnn.build,
               feature_maps, progress)
    a, graph = st.analysis, st.network.graph
    dead = dead_channels(st.network, st.data.X_test)
    paths = common_outputs(outputs, st, "case_mnist1d")
    alone = {n: [n] for n in a.nodes}
    paths += outputs.figure(profile_figure(a, alone, {n: [n] for n in a.channel_energy}, "channel",
                                           "per channel of the feature maps"), "case_mnist1d_nodes")
    rows = summary_rows(st) + [["ReLU channels active on no test input (" + ", ".join(dead) + ")",
                                ", ".join(f"{v}/{graph.shapes[n][0]}" for n, v in dead.items())]]
    paths += outputs.table("case_mnist1d_summary", *table_texts(["quantity", "value"], rows))
    paths += outputs.table("case_mnist1d_nodes", *table_texts(["node", "shape", *SHARE_HEADER], node_rows(a, graph)))
    return paths, notes(st)
