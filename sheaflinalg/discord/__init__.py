"""Discord: where a state disagrees with the sheaf, edge by edge and coordinate by coordinate.

Per-edge discord of an assembled system and of a heat run's history
(:mod:`~sheaflinalg.discord.edges`), per-coordinate edge residuals of any
state (:mod:`~sheaflinalg.discord.edge_residuals`) and the pinned analysis of
any network, its output pinned to the labels
(:mod:`~sheaflinalg.discord.pinning.analysis`).  Graph networks get their
residuals per node, per channel and split by every pattern node
(:mod:`~sheaflinalg.discord.node_residuals`) and their pinned equilibrium with
Filippov sliding on ReLU surfaces (:mod:`~sheaflinalg.discord.pinning.graph`); attention blocks their
discord per head (:mod:`~sheaflinalg.discord.heads`).
Available as ``sl.discord``.

Beside ``dynamics``, ``training`` and ``spectral``: may import ``sheaf``,
``network``, ``kernels`` and ``_common``, not ``dynamics``.
"""

from ..sheaf.edge_groups import edge_kind, edge_layer, group
from .edge_residuals import EdgeResiduals, residuals
from .edges import discord_by_block, edge_discrepancies, group_history
from .heads import AttentionBlock, HeadDiscord, attention_blocks
from .node_residuals import NodeResiduals
from .pinning.analysis import PinnedDiscord, pinned

__all__ = ["edge_discrepancies", "discord_by_block", "group", "group_history", "edge_kind", "edge_layer",
           "residuals", "EdgeResiduals", "NodeResiduals", "pinned", "PinnedDiscord", "attention_blocks",
           "AttentionBlock", "HeadDiscord"]
