"""numba ``fastmath`` flags shared by the force routine and the output edge's terms."""

# "contract" fuses a * b + c into one FMA (one rounding instead of two): both
# modes of force_sweep use it on the same expressions, so a fused step equals
# the step taken from stored forces bit for bit.  Sums over samples may also be
# reordered ("reassoc") so that they vectorise; nothing else is relaxed (no
# NaN/Inf assumptions).
FMA = {"contract"}
FMA_SUMS = {"contract", "reassoc"}
