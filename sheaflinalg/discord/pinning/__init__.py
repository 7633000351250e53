"""The pinned analysis: the output pinned to the truth, the exact equilibrium and its discord
(``analysis``: ``sl.discord.pinned`` and a chain's solve), a graph network's pinned solves with pattern
iteration and Filippov sliding (``graph``).
"""
