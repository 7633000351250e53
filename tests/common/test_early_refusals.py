"""Options and data are refused at the entry, before any work: the work itself is replaced by a tripwire."""

import importlib

import numpy as np
import pytest

import sheaflinalg as sl

NET = sl.Network.random([2, 4, 1], seed=0)
X = np.random.default_rng(0).uniform(-2, 2, (4, 2))


class Tripwire(AssertionError):
    """Raised when work starts although the call should have been refused at its entry."""


def _trip(*args, **kwargs):
    raise Tripwire("work started before the arguments were checked")


# (module whose work is tripped, attribute, call)
CASES = {
    "verify bogus backend": ("sheaflinalg.sheaf.verification.verify", "harmonic_extension",
                             lambda: sl.verify(NET, X, backend="bogus"), ValueError, "backend"),
    "verify bad tol": ("sheaflinalg.sheaf.verification.verify", "harmonic_extension",
                       lambda: sl.verify(NET, X, tol=float("nan")), ValueError, "tol"),
    "complete bogus backend": ("sheaflinalg.sheaf.pins.completion", "assemble",
                               lambda: sl.complete(NET, X, backend="bogus"), ValueError, "backend"),
    "complete bad max_iter": ("sheaflinalg.sheaf.pins.completion", "assemble",
                              lambda: sl.complete(NET, X, max_iter=2.5), TypeError, "max_iter"),
    "pinned bogus backend": ("sheaflinalg.sheaf.pins.completion", "assemble",
                             lambda: sl.discord.pinned(NET, X, NET.forward(X), backend="bogus"), ValueError,
                             "backend"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_before_any_work(case, monkeypatch):
    module, attribute, call, error, word = CASES[case]
    monkeypatch.setattr(importlib.import_module(module), attribute, _trip)
    with pytest.raises(error, match=word):
        call()


def test_cholmod_without_scikit_sparse_is_refused_before_any_work(monkeypatch):
    factor = importlib.import_module("sheaflinalg.sheaf.assembled.factor")
    monkeypatch.setattr(factor, "_cholmod", None)
    monkeypatch.setattr(importlib.import_module("sheaflinalg.sheaf.verification.verify"), "harmonic_extension", _trip)
    monkeypatch.setattr(importlib.import_module("sheaflinalg.sheaf.pins.completion"), "assemble", _trip)
    for call in (lambda: sl.verify(NET, X, backend="cholmod"), lambda: sl.complete(NET, X, backend="cholmod")):
        with pytest.raises(ImportError, match="scikit-sparse"):
            call()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_spectral_tracker_refuses_non_finite_inputs_when_built(bad):
    X_bad = X.copy()
    X_bad[2, 1] = bad
    with pytest.raises(ValueError, match=r"X contains NaN or Inf \(first at index \(2, 1\)\)"):
        sl.SpectralTracker(X_bad)


@pytest.mark.parametrize("call, what", [
    (lambda X: sl.verify(NET, X), "the verification"),
    (lambda X: sl.spectrum(NET, X, progress=False), "the spectra"),
    (lambda X: sl.harmonic_extension(NET, X), "the harmonic extension"),
    (lambda X: NET.forward(X), "the forward pass"),
])
def test_a_batch_too_big_for_memory_is_refused_before_it_is_allocated(call, what, monkeypatch):
    memory = importlib.import_module("sheaflinalg._common.memory")
    monkeypatch.setattr(memory, "available_bytes", lambda: 64)     # 64 bytes left
    monkeypatch.setattr(memory, "BATCH_FLOOR", 0)
    with pytest.raises(sl.InsufficientMemoryError, match=f"{what} of 4 samples: about .* needed but only 64 B"):
        call(X)
