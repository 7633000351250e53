"""The options of the linearly implicit scheme (``heat(method="implicit")``), validated before any work."""

from dataclasses import dataclass

import numpy as np

from ..._common.validation import check_bool, check_int, check_positive, check_tol
from ..euler.settings import recorded_samples

#: The options the implicit scheme uses, with their defaults (see :func:`sheaflinalg.heat`).
DEFAULTS = dict(dt=1e4, max_steps=500, record_every=0, record_states=None, crossings=True, max_crossings=100_000,
                cg_tol=1e-10, cg_max_iter=200)


@dataclass(frozen=True)
class ImplicitSettings:
    """The implicit scheme's own options (:data:`DEFAULTS` names them), validated by :meth:`validated`.

    ``dt`` is the first step's; every step taken doubles it and every step refused halves it
    (:mod:`sheaflinalg.dynamics.implicit.run`).
    """

    dt: float
    max_steps: int
    record_every: int
    record_states: np.ndarray
    crossings: bool
    max_crossings: int
    cg_tol: float
    cg_max_iter: int
    #: The force is always the energy's gradient (the output edge's adjoint), as forward Euler's default.
    output_force = "adjoint"

    @classmethod
    def validated(cls, n_samples, dt, max_steps, record_every, record_states, crossings, max_crossings, cg_tol,
                  cg_max_iter):
        """Check every option (``record_states`` against the batch of ``n_samples``)."""
        record_every = check_int(record_every, "record_every", 0)
        return cls(dt=check_positive(dt, "dt"), max_steps=check_int(max_steps, "max_steps", 0),
                   record_every=record_every,
                   record_states=recorded_samples(record_states, n_samples, record_every),
                   crossings=check_bool(crossings, "crossings"),
                   max_crossings=check_int(max_crossings, "max_crossings", 0),
                   cg_tol=check_tol(cg_tol, "cg_tol", zero=False), cg_max_iter=check_int(cg_max_iter, "cg_max_iter"))
