"""Compiled engine of the exact heat flow: Krylov segments, event scan, Filippov classification.

In a region (active units, sliding units) the free coordinates ``F`` follow
``d omega_F/dt = -alpha (L_FF omega_F + c)``.  With ``g0 = D_F^T (D omega0 + e)``
(the force at the segment's start) the whole trajectory lies in the Krylov space
``K(L_FF, g0)``.  Lanczos with full reorthogonalisation (twice) from ``g0`` runs
until ``beta_k <= KRYLOV_TOL * ||T||`` (the space is invariant to round-off: the
grade) or ``k = |F|``; with ``T = S diag(theta) S^T`` and
``gamma = ||g0|| S^T e1 / theta``::

    omega*_F = omega0_F - V S gamma,   omega_F(t) = omega*_F + V S (exp(-alpha theta t) * gamma).

The watched quantities of :mod:`sheaflinalg.dynamics.events` are then
``w_j(t) = c_j + sum_i C_ji exp(-mu_i t)`` with ``mu = alpha theta``, and the event
scan is that module's, compiled (same bounds, chunks, subdivision on an
explicit stack, ``never_again``; Brent's method as in scipy's ``brentq``), with a
round-off rule that adds the rounding of the Krylov representation.  A posteriori, the Krylov error
of a segment's states is at most
``beta_k ||g0|| (|e_k^T T^-1 e_1| / theta_min + sum_i |S_ki S_1i| / theta_i^2)``
(``lambda_min(L_FF)`` taken as ``theta_min``).

Held coordinates (hard pins, ``z`` of sliding units) are zero in every Krylov
vector.  ``D = D0 - sum_{u active} e_{ea_row(u)} e_{z(u)}^T`` is applied matrix-free.
No bounds are checked: the Python side (:mod:`sheaflinalg.dynamics.exact.krylov`)
sizes every array.

One module per part: :mod:`.structs` (the named structures and codes), :mod:`.krylov`
(a segment's set-up: the operator's products, Lanczos, the fixed point, the Krylov error bound, the
state at a time), :mod:`.regions` (the watched quantities of a region, the initial region and the
Filippov classification of events), :mod:`.scan` (the event scan and the time to ``tol``) and
:mod:`.driver` (one sample, a block of samples).

numba's cache watches each kernel's own file only, and these kernels call into each other's files:
as for the package's other kernels, the cache of this folder is dropped when any source in it changes.
"""

import os

from .. import drop_stale_numba_cache

drop_stale_numba_cache(os.path.dirname(os.path.abspath(__file__)))
