"""The named structures of the exact engine (numba namedtuples) and the codes its kernels share.

The kernels take :class:`ExactOperator` (the sparse operator of the flow and its hard pins),
:class:`SegmentRecords` and :class:`EventRecords` (the output buffers), :class:`SampleResults`
(per-sample results), :class:`ScanWorkspace` (the event scan's levels) and :class:`Sums` (the
watched sums of a segment).  They are module-level classes: numba's on-disk cache finds them again
by module and name.
"""

from collections import namedtuple

import numpy as np

#: The flow's operator: ``D0`` (CSR ``d_*``) and ``D0^T`` (CSR ``t_*``) on the free coordinates with every
#: unit inactive, the activation-edge row ``ea_rows``, free positions ``z_index``, ``a_index`` of every
#: hidden unit, the hard-pin mask ``held_pin`` (bool per free coordinate) and ``P`` (CSR ``p_*``,
#: ``p_j = (P omega)_j + p0_j``, the weight-edge force on ``z_j``).
ExactOperator = namedtuple("ExactOperator", ["d_ptr", "d_idx", "d_val", "t_ptr", "t_idx", "t_val", "ea_rows",
                                             "z_index", "a_index", "held_pin", "p_ptr", "p_idx", "p_val"])
#: Segment records: sample, start and end times, state at the start, active and sliding masks,
#: Krylov dimension, a-posteriori Krylov bound (one row per segment).
SegmentRecords = namedtuple("SegmentRecords", ["sample", "start", "end", "state", "active", "sliding", "k", "bound"])
#: Event records: time, sample, unit, kind (``CROSSING_UP`` ...), the unit's mask after the event.
EventRecords = namedtuple("EventRecords", ["time", "sample", "unit", "kind", "active"])
#: Per-sample results: stopping time, converged, final state, fixed point of the last region, handed back.
SampleResults = namedtuple("SampleResults", ["time", "converged", "final", "star", "fallback"])
#: The event scan's workspace, ``MAX_DEPTH`` levels: grid points, their number, position, ``w``, ``w'``,
#: and the bounds ``B1``, ``B2`` at every point (:func:`~.scan.scan_workspace`).
ScanWorkspace = namedtuple("ScanWorkspace", ["grid", "npts", "pos", "W", "DW", "B1", "B2"])
#: Watched sums ``w_j(t) = c_j + sum_i C_ji exp(-mu_i t)`` with round-off ``r``, and the products the
#: bounds use: ``C mu``, ``|C| mu``, ``|C| mu^2``.
Sums = namedtuple("Sums", ["c", "C", "r", "mu", "Cmu", "aCmu", "aCmu2"])

EPS = np.finfo(np.float64).eps

WATCH_Z, WATCH_P, WATCH_Q = 0, 1, 2
CROSSING_UP, CROSSING_DOWN, SLIDING_START, SLIDING_END = 0, 1, 2, 3
EVENT_KINDS = ("crossing_up", "crossing_down", "sliding_start", "sliding_end")   # the names of these codes

# Status of one sample / of a run.
OK, FULL, CAP = 0, 1, 2
# counters of exact_run
C_NEXT, C_NSEG, C_NEV, C_STATUS = 0, 1, 2, 3
N_COUNTERS = 4
