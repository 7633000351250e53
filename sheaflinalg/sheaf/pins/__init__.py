"""Pins and completion: hard pins, soft pins and reluctance edges with their one resolver (``specs``), and
the exact completion of partially pinned networks (``completion``).
"""
