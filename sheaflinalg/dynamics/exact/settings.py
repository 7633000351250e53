"""The options of the exact flow (``heat(method="exact")``), validated before any work."""

from dataclasses import dataclass

import numpy as np

from ..._common.validation import check_int, check_positive

#: The options only the exact flow uses, with their defaults (see :func:`sheaflinalg.heat`).
DEFAULTS = dict(t_max=None, max_events=10_000)


@dataclass(frozen=True)
class ExactSettings:
    """The exact flow's own options: ``t_max`` (``inf``: to the equilibrium) and ``max_events``."""

    t_max: float
    max_events: int

    @classmethod
    def validated(cls, net, t_max, max_events):
        """Check the options, and that ``net``'s flow is piecewise affine (identity output)."""
        check_affine(net)
        return cls(t_max=np.inf if t_max is None else check_positive(t_max, "t_max"),
                   max_events=check_int(max_events, "max_events", 1))


def check_affine(net):
    """Refuse a flow that is not piecewise affine (a nonlinear output), naming ``method``."""
    if net.output != "identity":
        raise ValueError(
            f"method='exact' needs a piecewise-affine flow, i.e. identity output; this network's output is "
            f"{net.output!r}, whose output edge is nonlinear (not piecewise affine). Use method='euler' "
            "for sigmoid, tanh and softmax outputs")
