"""The options of forward Euler (``heat(method="euler")``), validated before any work."""

from dataclasses import dataclass

import numpy as np

from ..._common.validation import check_bool, check_choice, check_int, check_positive

OUTPUT_FORCES = ("adjoint", "discrepancy")
#: The options only forward Euler uses, with their defaults (see :func:`sheaflinalg.heat`).
DEFAULTS = dict(dt=0.01, max_steps=100_000, record_every=0, record_states=None, output_force="adjoint",
                crossings=True, max_crossings=100_000, sliding_window=5, sliding_min_flips=3,
                check_stability=True, adaptive=None)


@dataclass(frozen=True)
class EulerSettings:
    """Forward Euler's own options (:data:`DEFAULTS` names them), validated by :meth:`validated`."""

    dt: float
    max_steps: int
    record_every: int
    record_states: np.ndarray
    output_force: str
    crossings: bool
    max_crossings: int
    sliding_window: int
    sliding_min_flips: int
    check_stability: bool
    adaptive: object = None

    @classmethod
    def validated(cls, n_samples, dt, max_steps, record_every, record_states, output_force, crossings,
                  max_crossings, sliding_window, sliding_min_flips, check_stability, adaptive=None):
        """Check every option (``record_states`` against the batch of ``n_samples``)."""
        record_every = check_int(record_every, "record_every", 0)
        check_stability = check_bool(check_stability, "check_stability")
        adaptive = None if adaptive is None else check_bool(adaptive, "adaptive")
        if adaptive and not check_stability:
            raise ValueError("adaptive=True halves an unstable dt, check_stability=False runs dt unchecked: "
                             "pass one of them")
        return cls(dt=check_positive(dt, "dt"), max_steps=check_int(max_steps, "max_steps", 0),
                   record_every=record_every,
                   record_states=recorded_samples(record_states, n_samples, record_every),
                   output_force=check_choice(output_force, OUTPUT_FORCES, "output_force"),
                   crossings=check_bool(crossings, "crossings"), max_crossings=check_int(max_crossings, "max_crossings", 0),
                   sliding_window=check_int(sliding_window, "sliding_window", 1),
                   sliding_min_flips=check_int(sliding_min_flips, "sliding_min_flips", 2),
                   check_stability=check_stability, adaptive=adaptive)


def recorded_samples(record_states, M, record_every):
    """``record_states`` as sample indices in ``[0, M)`` (int64; empty for None)."""
    if record_states is None:
        return np.zeros(0, dtype=np.int64)
    rec = np.atleast_1d(np.asarray(record_states))
    if rec.dtype.kind not in "iu" or rec.ndim != 1 or (rec.size and (rec.min() < 0 or rec.max() >= M)):
        raise ValueError(f"record_states must be sample indices in [0, {M}), got {record_states!r}")
    if rec.size and record_every == 0:
        raise ValueError("record_states needs record_every > 0")
    return rec.astype(np.int64)
