"""Certificates: ``det delta_Omega = 1`` and harmonic extension = forward pass (``verify``), the rank
certificate of the tall ``delta_Omega`` of the skip-edge encoding (``verify_edges``, ``rank``).
"""
