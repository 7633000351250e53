"""Private helpers shared by every layer: input validation, atomic file output, checked ``.npz``
reading, progress bars, BLAS thread limits.

Imports nothing from the rest of the package (it sits at the bottom, with ``kernels``).
"""
