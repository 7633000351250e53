"""The exact event-driven heat flow (identity output): piecewise affine, integrated segment by segment.

Shared by the paths: :mod:`.affine` (the field of a region), :mod:`.regions`
(regions, cached), :mod:`.settings`, :mod:`.result`.  One module per path:
:mod:`.krylov` (the compiled engine, :mod:`sheaflinalg.kernels.exact`),
:mod:`.dense` (dense eigendecompositions) and :mod:`.expm` (``expm_multiply``
for large networks), the last two driven by :mod:`.fallback` for the samples the
engine hands back; :mod:`.flow` runs a batch and builds the result.
"""
