"""The linearly implicit heat equation of graph networks (``heat(method="implicit")``) against a dense twin.

The twin is written from the definitions: every sample's residuals and their dense Jacobian ``J`` at its
state (the pattern read off the state, the naive restriction maps of tests/helpers/naive_graph.py), the
energy, a dense solve of ``(I + alpha dt (J^T J + soft pins + reluctance)) d = -alpha dt grad E`` on the
moving coordinates, and the same step control (a step that does not lower the energy, or keep it within
its rounding and lower the gradient, is refused and ``dt`` halved; a step taken doubles it).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.naive import phi, phi_jacobian
from helpers.naive_graph import node_dense, read_pattern
from helpers.random_graphs import EVERY_STEP, graph_networks, random_graph, random_inputs, random_pins
import sheaflinalg as sl
from sheaflinalg.dynamics.implicit.run import ROUNDING
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.pins.specs import resolve_pins


def _residuals_and_jacobian(net, lay, x, s):
    """One sample's residuals ``e`` (edge order) and ``J = de/ds`` on the free coordinates at its state ``s``."""
    graph = net.graph
    state = {node.name: s[lay.free(node.name)] for node in graph.nodes}
    values = {"x": x, **state}
    pattern = read_pattern(graph, values)
    e, J = np.zeros(lay.n_edges), np.zeros((lay.n_edges, lay.n_free))
    for node in graph.nodes:
        rows = lay.edge(f"e_{node.name}")
        maps, bias = node_dense(node, graph, pattern.get(node.name))
        e[rows] = state[node.name] - sum(F @ values[u] for u, F in maps) - (0.0 if bias is None else bias)
        J[rows, lay.free(node.name)] += np.eye(graph.sizes[node.name])
        for u, F in maps:
            if u != "x":
                J[rows, lay.free(u)] -= F
    if not lay.reduced:
        z, rows = state[graph.output_node], lay.edge("e_y")
        e[rows] = s[lay.free("yhat")] - phi(net.output, z)
        J[rows, lay.free("yhat")] += np.eye(z.size)
        J[rows, lay.free(graph.output_node)] -= phi_jacobian(net.output, z)
    return e, J


class _Twin:
    """The dense implicit scheme of one sample: energy, gradient and Gauss-Newton Hessian, steps."""

    def __init__(self, net, lay, x, resolved):
        self.net, self.lay, self.x = net, lay, x
        self.soft, self.lam = resolved.soft, resolved.lam
        self.moving = np.setdiff1d(np.arange(lay.n_free), resolved.hard.index)

    def parts(self, s, row):
        """``(E, grad E, H)`` at ``s`` (``row``: the sample's soft-pin targets)."""
        e, J = _residuals_and_jacobian(self.net, self.lay, self.x, s)
        energy, grad, H = 0.5 * e @ e, J.T @ e, J.T @ J
        if self.soft.size:
            k, gamma = self.soft.index, self.soft.gamma
            energy += 0.5 * np.sum(gamma * (s[k] - self.soft.values[row]) ** 2)
            grad[k] += gamma * (s[k] - self.soft.values[row])
            H[k, k] += gamma
        if self.lam:
            m = self.moving
            energy += 0.5 * self.lam * s[m] @ s[m]
            grad += self.lam * s
            H += self.lam * np.eye(s.size)
        return energy, grad, H

    def step(self, s, row, c):
        """``(trial state, whether it is taken)`` of one step from ``s`` with ``c = alpha dt``: taken if the
        energy is lower, or within its rounding and the gradient on the moving coordinates smaller."""
        energy, grad, H = self.parts(s, row)
        m = self.moving
        d = np.zeros_like(s)
        d[m] = np.linalg.solve(np.eye(m.size) + c * H[np.ix_(m, m)], -c * grad[m])
        new, new_grad, _ = self.parts(s + d, row)
        smaller = np.linalg.norm(new_grad[m]) < np.linalg.norm(grad[m])
        return s + d, bool(new <= energy or (new <= (1 + ROUNDING) * energy and smaller))


def _twin_run(twin, s, row, alpha, dt, steps):
    """The twin's states, ``dt`` and taken steps over ``steps`` steps."""
    dts, taken = [], []
    for _ in range(steps):
        trial, take = twin.step(s, row, alpha * dt)
        dts.append(dt)
        taken.append(take)
        s, dt = (trial, 2.0 * dt) if take else (s, 0.5 * dt)
    return s, dts, taken


@settings(max_examples=8, deadline=None)
@given(case=graph_networks(outputs=("identity", "sigmoid", "softmax"), max_layers=3), reduced=st.booleans(),
       dt=st.sampled_from([0.05, 1.0, 1e3]))
def test_implicit_steps_equal_the_dense_steps(case, reduced, dt):
    net, seed, mode = case
    _check_against_twin(net, seed, mode, reduced and net.output == "identity", dt, 3)


def test_refused_implicit_steps_equal_the_dense_ones():
    # a graph of smooth nodes whose first large steps from the random start raise the energy
    net = random_graph(24, "mixed", steps=EVERY_STEP, max_layers=4)
    res = _check_against_twin(net, 24, "mixed", True, 1e4, 3, pinned=False)
    assert (~res.taken).sum() >= 2


def _check_against_twin(net, seed, mode, reduced, dt, steps, pinned=True):
    """``steps`` implicit steps of a batch of two equal the twin's; the result.  Pinned: random pins and a start
    near the forward pass; else none and ``heat``'s random start of ``seed``."""
    rng = np.random.default_rng(seed)
    M, alpha = 2, 0.7
    X = random_inputs(net, seed, M, mode).reshape(M, -1)
    lay = Layout.from_graph(net.graph, reduced=reduced)
    pins, soft, lam = random_pins(net, lay, rng, M) if pinned else (None, None, None)
    S0 = sl.harmonic_extension(net, X).free[:, :lay.n_free] + rng.normal(size=(M, lay.n_free)) if pinned else \
        sl.heat(net, X, max_steps=0, seed=seed, reduced=reduced, method="implicit", progress=False).state
    res = sl.heat(net, X, alpha=alpha, dt=dt, max_steps=steps, tol=0.0, init=S0, pins=pins, soft_pins=soft,
                  reluctance=lam, reduced=reduced, method="implicit", cg_tol=1e-14, cg_max_iter=2000,
                  progress=False)
    resolved = resolve_pins(net, X, lay, pins, soft, lam)
    S0[:, resolved.hard.index] = resolved.hard.values
    for row in range(M):
        twin = _Twin(net, lay, X[row], resolved)
        s, dts, taken = _twin_run(twin, S0[row], row, alpha, dt, steps)
        scale = 1.0 + np.abs(s).max()
        np.testing.assert_allclose(res.state[row], s, rtol=0, atol=1e-8 * scale)
        np.testing.assert_array_equal(res.dts[:, row], dts)
        np.testing.assert_array_equal(res.taken[:, row], taken)
        assert res.discord[row] == pytest.approx(twin.parts(res.state[row], row)[0], rel=1e-9, abs=1e-12)
    assert res.steps == steps and np.all(np.diff(res.energies, axis=0) <= ROUNDING * res.energies[:-1])
    return res


def _monotone(res):
    """The energies of every sample never rise by more than their rounding."""
    return bool(np.all(np.diff(res.energies, axis=0) <= ROUNDING * res.energies[:-1]))


# every pattern kind of the convolutional chains, and graphs of every step (smooth nodes, products, softmax)
# whose large first steps raise the energy (seeds 24, 50: refused steps) or cross patterns (42)
@pytest.mark.parametrize("seed,mode,steps,output", [
    (0, "mixed", None, "identity"), (1, "active", None, "sigmoid"), (2, "dead", None, "softmax"),
    (3, "ties", None, "identity"), (24, "mixed", "every", "identity"), (42, "dead", "every", "identity"),
    (50, "dead", "every", "softmax")])
def test_implicit_heat_reaches_the_forward_pass_with_a_falling_energy(seed, mode, steps, output):
    options = dict(steps=EVERY_STEP, max_layers=4) if steps else {}
    net = random_graph(seed, mode, output=output, **options)
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    res = sl.heat(net, X, method="implicit", tol=1e-11, seed=seed, progress=False)
    assert res.converged and res.steps <= 20 and _monotone(res)
    np.testing.assert_allclose(res.state, sl.harmonic_extension(net, X).free[:, :res.layout.n_free], atol=1e-9)
    assert repr(res).startswith("ImplicitHeatResult(steps=")
    if seed in (24, 50):
        assert not res.taken.all()
        refused = np.flatnonzero(~res.taken[:, 0] | ~res.taken[:, 1])[0]
        assert np.all(res.dts[refused + 1][~res.taken[refused]] == 0.5 * res.dts[refused][~res.taken[refused]])


def test_implicit_heat_from_the_forward_pass_stays_there():
    net = random_graph(3, "ties")           # exact zero pre-activations and tied max-pool windows
    X = random_inputs(net, 3, 2, "ties").reshape(2, -1)
    res = sl.heat(net, X, method="implicit", init="forward", tol=1e-12, progress=False)
    assert res.converged and res.steps == 1 and res.final_change == 0.0 and np.all(res.discord == 0.0)


@pytest.mark.parametrize("seed,mode", [(5, "active"), (10, "dead"), (11, "ties"), (12, "mixed")])
def test_pinned_implicit_heat_reaches_the_pinned_equilibrium(seed, mode):
    net = random_graph(seed, mode)
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    first, last = net.graph.nodes[0].name, net.graph.output_node
    common = dict(pins={f"{first}[channel=0]": 0.25}, soft_pins=({f"{last}[0]": 1.5}, 2.0), reluctance=0.1)
    done = sl.complete(net, X, **common)
    res = sl.heat(net, X, method="implicit", tol=1e-12, progress=False, **common)
    assert done.settled and res.converged and res.steps <= 20 and _monotone(res)
    np.testing.assert_allclose(res.state, done.state, atol=1e-9)
    np.testing.assert_allclose(res.discord, done.discord, rtol=1e-9)


def test_implicit_records_and_crossings():
    net = random_graph(9, "active")
    X = random_inputs(net, 9, 3, "active").reshape(3, -1)
    res = sl.heat(net, X, method="implicit", dt=1.0, tol=1e-11, seed=4, record_every=1, record_states=[0, 1, 2],
                  progress=False)
    h, lay = res.history, res.layout
    assert res.converged and np.array_equal(h.steps, np.arange(res.steps + 1))
    np.testing.assert_allclose(h.sample_discord, res.energies, rtol=1e-12)
    np.testing.assert_array_equal(h.states[-1], res.state)
    # the log is every change of a rectifier's mask between two recorded states
    relus = {k + 1: node for k, node in enumerate(net.graph.nodes) if node.op == "relu"}
    expected = []
    for layer, node in relus.items():
        masks = h.states[:, :, lay.free(node.inputs[0])] >= 0
        step, sample, entry = np.nonzero(masks[1:] != masks[:-1])
        expected += [(k + 1, s, layer, e, int(masks[k + 1, s, e])) for k, s, e in zip(step, sample, entry)]
    logged = [tuple(row) for row in res.crossings.tolist() if row[2] in relus]
    assert len(expected) > 0 and sorted(logged) == sorted(expected)
    capped = sl.heat(net, X, method="implicit", dt=1.0, tol=1e-11, seed=4, max_crossings=2, progress=False)
    np.testing.assert_array_equal(capped.crossings, res.crossings[:2])
    assert capped.crossings_total == res.crossings_total


@pytest.mark.parametrize("options,error,message", [
    (dict(cg_tol=0.0), ValueError, "cg_tol must be a finite number > 0"),
    (dict(cg_max_iter=0), ValueError, "cg_max_iter must be a positive integer"),
    (dict(cg_max_iter=2.0), TypeError, "cg_max_iter must be an integer"),
    (dict(dt=-1.0), ValueError, "dt must be a finite number > 0"),
    (dict(check_stability=False), ValueError, r"heat\(method='implicit'\) does not use check_stability"),
    (dict(output_force="discrepancy"), ValueError, r"does not use output_force \(an option of method='euler'"),
    (dict(t_max=1.0), ValueError, r"does not use t_max \(an option of method='exact' only\)"),
    (dict(record_states=[0]), ValueError, "record_states needs record_every > 0"),
])
def test_bad_implicit_options_are_refused(options, error, message):
    net = random_graph(0, "mixed")
    with pytest.raises(error, match=message):
        sl.heat(net, random_inputs(net, 0, 1).reshape(1, -1), method="implicit", progress=False, **options)


def test_implicit_options_are_refused_elsewhere_and_chains_are_refused():
    net = random_graph(0, "mixed")
    with pytest.raises(ValueError, match=r"heat\(method='euler'\) does not use cg_tol \(an option of method='implicit'"):
        sl.heat(net, random_inputs(net, 0, 1).reshape(1, -1), cg_tol=1e-8, progress=False)
    with pytest.raises(ValueError, match="method='implicit'.* takes a graph network"):
        sl.heat(sl.Network.random([2, 3, 1], seed=0), [0.5, 1.0], method="implicit", progress=False)


def test_implicit_heat_does_not_depend_on_threads():
    net = random_graph(8, "mixed")
    X = random_inputs(net, 8, 3).reshape(3, -1)
    one, two = (sl.heat(net, X, method="implicit", tol=1e-11, seed=1, threads=t, progress=False) for t in (1, 2))
    np.testing.assert_array_equal(one.state, two.state)
    np.testing.assert_array_equal(one.cg_iterations, two.cg_iterations)
