"""The paper's encoding of skip connections (``skip_encoding="edges"``): one two-endpoint edge per parent
(``encoding``), and its harmonic extension as a least-squares solution (``least_squares``).
"""
