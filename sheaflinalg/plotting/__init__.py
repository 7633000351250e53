"""Matplotlib figures, one module per topic (imported lazily: matplotlib is optional at import time)."""
