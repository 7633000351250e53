"""Spectral statistics recorded along a training run (a callback of ``train`` and ``sgd``)."""

import numpy as np

from .._common.validation import as_float64, check_choice, check_int, check_tol
from ..network.model import NetworkOverflowError
from .drivers import METHODS, SYSTEMS, TOL, IllConditionedSpectrumError, spectrum


class SpectralTracker:
    """Training callback recording spectral statistics (sheaf training and SGD alike).

    Call it with the ``info`` object of ``sl.train(..., callback=tracker)`` /
    ``sl.sgd(..., callback=tracker)`` (attributes ``method``, ``epoch``,
    ``step``, ``network``, ``X``).  Every ``every`` steps it computes
    :func:`spectrum` of the current network on ``X`` (default: the training
    inputs) and appends one record to :attr:`records`.  When the weights
    have grown past what float64 resolves (the forward pass overflows, or
    the dense ``lambda_min`` is below rounding level) it appends
    ``(step, message)`` to :attr:`skipped` instead, so that it never stops
    the run it watches.

    Parameters
    ----------
    X : array_like, optional
        Inputs to probe (default: ``info.X``).
    every : int
        Record when ``info.step`` is a multiple of ``every`` (the first call
        always records).
    k, system, method, tol : see :func:`spectrum`

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from types import SimpleNamespace
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(20, 2))
    >>> tracker = SpectralTracker(X, every=1)
    >>> tracker(SimpleNamespace(method="sgd", epoch=0, step=0, network=net, X=X))
    >>> len(tracker.records), round(tracker.records[0]["lambda_min"]["median"], 3) > 0
    (1, True)
    """

    def __init__(self, X=None, every=1, k=1, system="reduced", method="auto", tol=TOL):
        every = check_int(every, "every")
        k = check_int(k, "k")
        tol = check_tol(tol, "tol")
        check_choice(system, SYSTEMS, "system")
        check_choice(method, METHODS, "method")
        self.X = None if X is None else as_float64(X, "X")
        if self.X is not None and (self.X.ndim != 2 or self.X.shape[0] == 0):
            raise ValueError(f"X must be a non-empty 2-D array (n_samples, n_features), got shape {self.X.shape}")
        self.every, self.k, self.system, self.method, self.tol = every, k, system, method, tol
        self.records = []
        self.skipped = []

    def __call__(self, info):
        step = int(getattr(info, "step", 0))
        if self.records and step % self.every:
            return
        X = self.X if self.X is not None else info.X
        try:
            sp_ = spectrum(info.network, X, k=self.k, vectors=True, system=self.system,
                           method=self.method, tol=self.tol, progress=False)
        except (NetworkOverflowError, IllConditionedSpectrumError) as exc:
            # A monitor does not stop the run it watches: weights past float64 are noted, not recorded.
            self.skipped.append((step, str(exc)))
            return
        rec = {"method": getattr(info, "method", None), "epoch": getattr(info, "epoch", None),
               "step": step}
        rec.update(sp_.summary())
        rec["blocks"] = sp_.block_names
        rec["energy_min"] = sp_.block_energy("smallest").mean(axis=0)
        rec["energy_max"] = sp_.block_energy("largest").mean(axis=0)
        rec["stability_min"] = sp_.stability("smallest")
        rec["stability_max"] = sp_.stability("largest")
        rec["lambda_min_samples"] = sp_.lambda_min.copy()
        self.records.append(rec)

    def series(self, quantity="lambda_min", stat="median"):
        """``(steps, values)`` of one statistic over the records, e.g. ``("condition", "q75")``."""
        steps = np.array([r["step"] for r in self.records])
        return steps, np.array([r[quantity][stat] for r in self.records])
