"""matplotlib figures, one module per topic (heat, exact, training, spectral, discord, sweep), made by one
figure helper (:mod:`~sheaflinalg.plotting.figure`) without pyplot; matplotlib is imported lazily.

May import every layer below it (``spectral``, ``training``, ``dynamics``, ``sheaf``, ``network``,
``_common``), never ``commands``.
"""
