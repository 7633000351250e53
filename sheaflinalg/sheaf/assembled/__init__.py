"""The sheaf as assembled ``scipy.sparse`` matrices: block rows, ``delta``, the Laplacian blocks, factors.

``assembly`` (``assemble`` and its checks, the memory estimate), ``system`` (``SheafSystem``),
``augmented`` (``AugmentedSheafSystem``: pins, soft pins, reluctance edges), ``block_rows`` (one
sample's block rows, from the op rules), ``sparse_blocks`` (CSR straight from blocks), ``factor``
(CHOLMOD or SuperLU).
"""
