"""matplotlib figures, one module per topic (heat, training, spectra); matplotlib is imported lazily.

May import every layer below it (``spectral``, ``training``, ``dynamics``, ``sheaf``, ``network``,
``_common``), never ``commands``.
"""
