"""Case study: the sheaf of a small vision transformer trained on MNIST-1D (beyond the paper).

The companion of :mod:`.case_mnist1d` for attention: the ViT of :mod:`.mnist1d_vit` trained by
backpropagation, imported (its LayerNorms, GELUs, softmaxes and attention products enter as their
tangents at the forward state, where the spectrum of the sheaf Laplacian is the Hessian of the energy),
certified, and analysed (:mod:`.case_analysis`): the spectral gap per class and for correct vs
misclassified inputs, where the Fiedler vector's energy sits sub-layer by sub-layer and head by head,
and the pinned discord of misclassified inputs the same way.  Figures, tables and the trained network
go to the output directory; the network is reused by a rerun (``networks/``).
"""

import numpy as np

from . import mnist1d_vit
from ..discord.heads import attention_blocks
from .case_report import (SHARE_HEADER, Settings, common_outputs, node_rows, notes, profile_figure, quartiles, shares,
                          study, summary_rows)
from .output import table_texts

__all__ = ["SETTINGS", "case_vit"]

SETTINGS = {False: Settings(5000, mnist1d_vit.Protocol(epochs=50, lr=1e-3), 10, 20, 100, 40, max_iter=30),
            True: Settings(500, mnist1d_vit.Protocol(epochs=20, lr=1e-3), 2, 1, 3, 3, max_iter=10)}


#: The case study's name of each role of an attention block's nodes (:attr:`AttentionBlock.roles`).
PARTS = {"queries": "q", "keys": "k", "values": "v", "scores": "scores", "weights": "softmax", "output": "P V"}


def _groups(graph):
    """``{node: 0}`` for the nodes the heads split (their leading axis): the library's grouping by head
    (:func:`sheaflinalg.discord.attention_blocks`, the same as ``NodeResiduals.per_head``)."""
    return {name: 0 for block in attention_blocks(graph) for name in block.roles.values()}


def head_rows(graph, stage_of):
    """``{"block i part": [node]}``: the nodes the heads split, by block and role (:data:`PARTS`), in order."""
    rows = {}
    for block in attention_blocks(graph):
        for role, name in block.roles.items():
            rows.setdefault(f"{stage_of[name].rsplit(' ', 1)[0]} {PARTS[role]}", []).append(name)
    return rows


def head_table(a, rows):
    """Per row of :func:`head_rows` and head: the median share of the Fiedler energy (correct, misclassified inputs)
    and of the pinned discord (settled pinned inputs) on that head, out of the analysis' total."""
    energy = {row: sum(a.channel_energy[n] for n in nodes) for row, nodes in rows.items()}
    discord = {row: sum(a.channel_discord[n][a.settled] for n in nodes) for row, nodes in rows.items()}
    total = a.discord[a.settled].sum(axis=1, keepdims=True)
    share = {row: np.divide(d, total, out=np.zeros_like(d), where=total > 0) for row, d in discord.items()}
    return [[row, h, quartiles(e[a.correct, h])[0], quartiles(e[~a.correct, h])[0], quartiles(share[row][:, h])[0]]
            for row, e in energy.items() for h in range(e.shape[1])]


def head_balance(a, rows):
    """Per input, the share of head 0 in the Fiedler energy on the nodes with a heads axis (0.5: balanced)."""
    e = sum(a.channel_energy[n] for nodes in rows.values() for n in nodes)
    return e[:, 0] / e.sum(axis=1)


def margins(st):
    """The pinned inputs' own margins: the largest logit minus the second largest (the size of the pinned change)."""
    a = st.analysis
    top = np.sort(st.network.forward(st.data.X_test[a.index[a.pinned]]), axis=1)
    return top[:, -1] - top[:, -2]


def case_vit(outputs, quick, progress=False):
    """The case study item: figures, tables and the trained network; the headline numbers as notes."""
    st = study(outputs, SETTINGS[quick], f"mnist1d_vit_{'quick' if quick else 'full'}", mnist1d_vit.build, _groups,
               progress)
    a, graph = st.analysis, st.network.graph
    stages = mnist1d_vit.stages(graph)
    stage_of = {n: s for s, nodes in stages.items() for n in nodes}
    rows = head_rows(graph, stage_of)
    paths = common_outputs(outputs, st, "case_vit")
    paths += outputs.figure(profile_figure(a, stages, rows, "head", "per head of the attention nodes"),
                            "case_vit_nodes")
    by_stage = shares(a, stages)
    top = max(by_stage, key=lambda s: by_stage[s][0])
    balance = head_balance(a, rows)
    summary = summary_rows(st) + [
        ["sub-layer with the most Fiedler energy (median, correct inputs)", f"{top}: {by_stage[top][0]:.3g}"],
        ["share of head 0 in the Fiedler energy on the heads (median, q25, q75)",
         ", ".join(f"{v:.3g}" for v in quartiles(balance))]]
    margin = margins(st)
    summary += [[f"median own margin (logits) of the pinned inputs, {which}", quartiles(margin[mask])[0]]
                for which, mask in (("settled", a.settled), ("not settled", ~a.settled))]
    paths += outputs.table("case_vit_summary", *table_texts(["quantity", "value"], summary))
    paths += outputs.table("case_vit_stages", *table_texts(
        ["sub-layer", "nodes", *SHARE_HEADER], [[s, len(stages[s]), *v] for s, v in by_stage.items()]))
    paths += outputs.table("case_vit_heads", *table_texts(
        ["nodes", "head", "Fiedler energy (correct)", "Fiedler energy (misclassified)",
         "share of the pinned discord (settled pinned)"], head_table(a, rows)))
    paths += outputs.table("case_vit_nodes", *table_texts(["node", "shape", *SHARE_HEADER], node_rows(a, graph)))
    return paths, notes(st)
