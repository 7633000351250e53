"""One name and one resolver for pins: ``resolve_pins`` against the pin format's definitions and
against what each entry point that calls it (heat, assemble, complete) does with the result, and the
deprecated alias ``complete(..., clamp=)``."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.sheaf.pins.specs import (check_disjoint, default_reduced, resolve, resolve_free_inputs, resolve_pins,
                                    resolve_reluctance, resolve_soft)

NETS = [([2, 4, 1], "identity"), ([2, 3, 3, 1], "identity"), ([3, 4, 2], "sigmoid"), ([2, 3, 3], "softmax")]


@st.composite
def pin_cases(draw):
    """A network, inputs and disjoint hard / soft pins (one selector per coordinate), maybe reluctance."""
    dims, output = draw(st.sampled_from(NETS))
    net = sl.Network.random(dims, seed=draw(st.integers(0, 1000)), output=output)
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    M = draw(st.integers(1, 3))
    X = rng.uniform(-1, 1, size=(M, dims[0]))
    labels = sl.Layout(dims).free_labels               # the full layout: yhat may be pinned
    chosen = rng.permutation(len(labels))[:draw(st.integers(0, len(labels) - 1))]
    n_hard = draw(st.integers(0, chosen.size))
    per_sample = draw(st.booleans())

    def value():
        return rng.normal(size=(M, 1)) if per_sample else float(rng.normal())
    pins = {labels[j]: value() for j in chosen[:n_hard]}
    soft = {labels[j]: value() for j in chosen[n_hard:]}
    gamma = {sel: float(rng.uniform(0.5, 5.0)) for sel in soft}
    lam = draw(st.sampled_from([None, 1e-3, 0.5]))
    return net, X, pins or None, sl.SoftPins(soft, gamma) if soft else None, lam


def naive_resolve(net, X, pins, soft_pins, lam):
    """The pin format's definitions, coordinate by coordinate (module docstring of sheaf.pins.specs)."""
    mentions_yhat = any(sel.startswith("yhat") for spec in (pins or {}, soft_pins.targets if soft_pins else {})
                        for sel in spec)
    layout = sl.Layout(net.dims, reduced=net.output == "identity" and not mentions_yhat)
    M = X.shape[0]

    def table(spec):
        rows = sorted((layout.free_labels.index(sel), np.broadcast_to(np.asarray(v, float).reshape(-1), (M,)))
                      for sel, v in (spec or {}).items())
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows]).T.reshape(M, len(rows)))
    hard = table(pins)
    soft = table(soft_pins.targets if soft_pins else None)
    gamma = np.array([soft_pins.gamma[layout.free_labels[j]] for j in soft[0]]) if soft_pins else np.zeros(0)
    return layout, hard, soft, gamma, (0.0 if lam is None else lam)


@settings(max_examples=60, deadline=None)
@given(pin_cases())
def test_resolver_follows_the_pin_format(case):
    net, X, pins, soft, lam = case
    r = resolve_pins(net, X, None, pins, soft, lam)
    layout, hard, soft_ref, gamma, lam_ref = naive_resolve(net, X, pins, soft, lam)
    assert r.layout.reduced == layout.reduced
    np.testing.assert_array_equal(r.hard.index, hard[0])
    np.testing.assert_array_equal(r.hard.values, hard[1])
    assert r.hard.labels == [layout.free_labels[j] for j in hard[0]]
    np.testing.assert_array_equal(r.soft.index, soft_ref[0])
    np.testing.assert_array_equal(r.soft.values, soft_ref[1])
    np.testing.assert_array_equal(r.soft.gamma, gamma)
    assert r.lam == lam_ref
    assert (r.anchor is None) == (lam is None)
    if lam is not None:
        np.testing.assert_array_equal(r.anchor, np.zeros((X.shape[0], layout.n_free)))
    assert r.free_inputs.size == 0


@settings(max_examples=30, deadline=None)
@given(pin_cases())
def test_resolver_equals_the_four_calls_it_replaces(case):
    """The sequence heat, assemble and complete each wrote out before the resolver existed."""
    net, X, pins, soft, lam = case
    lay = sl.Layout(net.dims, reduced=default_reduced(net, pins, soft))
    hard = resolve(lay, pins, X.shape[0], what="pins")
    soft_set = resolve_soft(lay, soft, X.shape[0])
    check_disjoint(hard, soft_set)
    lam_, anchor = resolve_reluctance(lay, lam, X.shape[0])
    r = resolve_pins(net, X, lay, pins, soft, lam, free_inputs=[0])
    for new, old in ((r.hard, hard), (r.soft, soft_set)):
        np.testing.assert_array_equal(new.index, old.index)
        np.testing.assert_array_equal(new.values, old.values)
        np.testing.assert_array_equal(new.gamma, old.gamma)
        assert new.labels == old.labels
    assert r.lam == lam_ and (r.anchor is None) == (anchor is None)
    np.testing.assert_array_equal(r.free_inputs, resolve_free_inputs([0], net.dims[0]))


@settings(max_examples=20, deadline=None)
@given(pin_cases())
def test_assemble_builds_on_the_resolved_pins(case):
    net, X, pins, soft, lam = case
    r = resolve_pins(net, X, None, pins, soft, lam)
    s = sl.assemble(net, X, reduced=r.layout.reduced, pins=pins, soft_pins=soft, reluctance=lam)
    if pins is None and soft is None and lam is None:
        assert not isinstance(s, sl.AugmentedSheafSystem)
        return
    assert s.layout.reduced == r.layout.reduced
    for got, want in ((s.hard_pins, r.hard), (s.soft_pins, r.soft)):
        np.testing.assert_array_equal(got.index, want.index)
        np.testing.assert_array_equal(got.values, want.values)
        np.testing.assert_array_equal(got.gamma, want.gamma)
    assert s.reluctance == r.lam


@settings(max_examples=12, deadline=None)
@given(pin_cases())
def test_heat_and_complete_hold_the_resolved_pins(case):
    net, X, pins, soft, lam = case
    r = resolve_pins(net, X, None, pins, soft, lam)
    h = sl.heat(net, X, dt=1e-3, max_steps=3, tol=0.0, init="zeros", pins=pins, soft_pins=soft, reluctance=lam,
                record_every=1, progress=False, crossings=False)
    assert h.layout.reduced == r.layout.reduced
    assert h.pinned == r.hard.labels
    np.testing.assert_array_equal(h.state[:, r.hard.index], r.hard.values)
    assert ("e_pin" in h.history.labels) == (r.soft.size > 0)
    assert ("e_rel" in h.history.labels) == (r.lam > 0)
    c = sl.complete(net, X, pins=pins, soft_pins=soft, reluctance=lam, max_iter=3)
    assert c.layout.reduced == r.layout.reduced
    np.testing.assert_array_equal(c.state[:, r.hard.index], r.hard.values)


def test_clamp_is_a_deprecated_alias_of_pins():
    net = sl.Network.random([2, 4, 3, 1], seed=0)
    X = np.random.default_rng(0).uniform(-1, 1, size=(3, 2))
    spec = {"a1[0,2]": 0.5, "z2[1]": -0.25}
    new = sl.complete(net, X, pins=spec)
    with pytest.warns(DeprecationWarning, match="use pins=") as caught:
        old = sl.complete(net, X, clamp=spec)
    assert caught[0].filename == __file__           # the warning points at the caller
    np.testing.assert_array_equal(old.state, new.state)
    np.testing.assert_array_equal(old.output, new.output)
    assert old.iterations == new.iterations and old.method == new.method
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sl.complete(net, X, pins=spec)              # the new name warns about nothing
        sl.complete(net, X, spec)                   # nor does the third positional argument (now pins)


def test_pins_and_clamp_together_are_refused():
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(TypeError, match="pins=.*clamp="):
        sl.complete(net, [[0.1, 0.2]], pins={"a1[0]": 1.0}, clamp={"a1[0]": 1.0})
    with pytest.raises(TypeError, match="pins=.*clamp="):     # even when they agree, or one is empty
        sl.complete(net, [[0.1, 0.2]], pins={}, clamp={"a1[0]": 1.0})


@pytest.mark.parametrize("call", ["heat", "assemble", "complete", "spectrum"])
def test_every_entry_point_refuses_a_bad_pin_with_the_same_message(call):
    net = sl.Network.random([2, 4, 1], seed=0)
    fn = {"heat": lambda **kw: sl.heat(net, [[0.1, 0.2]], progress=False, **kw),
          "assemble": lambda **kw: sl.assemble(net, [[0.1, 0.2]], **kw),
          "complete": lambda **kw: sl.complete(net, [[0.1, 0.2]], **kw),
          "spectrum": lambda **kw: sl.spectrum(net, [[0.1, 0.2]], progress=False, **kw)}[call]
    with pytest.raises(ValueError, match=r"^pin selector 'b1': no free block 'b1'"):
        fn(pins={"b1": 0.0})
    with pytest.raises(ValueError, match=r"^pins\['a1\[0\]'\]: expected a scalar"):
        fn(pins={"a1[0]": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="both hard-pinned and soft-pinned"):
        fn(pins={"a1[0]": 0.0}, soft_pins=({"a1[0]": 0.0}, 1.0))
    with pytest.raises(ValueError, match="reluctance strength"):
        fn(reluctance=-1.0)


def test_default_system_is_reduced_unless_yhat_is_pinned():
    ident = sl.Network.random([2, 3, 1], seed=0)
    sig = sl.Network.random([2, 3, 1], seed=0, output="sigmoid")
    assert default_reduced(ident)
    assert default_reduced(ident, pins={"z2": 1.0})
    assert not default_reduced(ident, pins={"yhat": 1.0})
    assert not default_reduced(ident, soft_pins=({"yhat[0]": 1.0}, 2.0))
    assert not default_reduced(sig)
