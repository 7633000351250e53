"""The heat equation step by step: forward Euler with the state-dependent ReLU sheaf.

:mod:`.settings` (the Euler options, validated), :mod:`.run` (kernel set-up and
result), :mod:`.parts` (a batch in parts, in threads) and :mod:`.result`
(:class:`~.result.HeatResult`).  Loading it loads nothing of the exact flow.
"""
