"""``sl.verify`` without an assembled matrix (``backend="matrix-free"``), against the assembled certificate."""

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.random_graphs import EVERY_STEP, graph_networks, random_graph, random_inputs
import sheaflinalg as sl
from sheaflinalg._common import memory
from sheaflinalg.cli import main
from sheaflinalg.network.graph.nodes import INPUT
from sheaflinalg.sheaf.assembled.assembly import assemble
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.verification.matrix_free import (boundary_term, coboundary_at, condition_bound,
                                                        discord_bound, matrix_free_checks)
from sheaflinalg.sheaf.verification.condition import condition_lower_estimate
from sheaflinalg.sheaf.verification.structure import structure_rows, unit_triangular_structure
from sheaflinalg.sheaf.verification.verify import CHECKS, unit_lower_triangular_certificate

OUTPUTS = ("identity", "sigmoid", "tanh", "softmax")


def _forward(net, X):
    h = sl.harmonic_extension(net, X)
    pattern = h.pattern if isinstance(h.pattern, dict) else dict(zip(net.graph.pattern_nodes, h.pattern))
    return h, pattern


@given(case=graph_networks(outputs=OUTPUTS))
@settings(max_examples=8)
def test_matrix_free_certificate_agrees_with_the_assembled_one(case):
    """Every step (smooth nodes, clamps, products, pools), every mode, chains and branching graphs: each
    measured number read off the dense matrices of the assembled system, the checks passing where the dense
    ones do."""
    net, seed, mode = case
    _check_against_dense(net, random_inputs(net, seed, 2, mode).reshape(2, -1))


@pytest.mark.parametrize("mode", ["mixed", "active", "dead", "ties"])
def test_every_mode_against_the_dense_matrices(mode):
    """All active, all dead, mixed, exact zero pre-activations and max-pool ties, on a branching graph of every
    step (smooth nodes among them) with a softmax output."""
    net = random_graph(11, mode, "softmax", steps=EVERY_STEP, branching=True)
    _check_against_dense(net, random_inputs(net, 11, 2, mode).reshape(2, -1))


def test_a_chain_against_the_dense_matrices():
    net = sl.Network.random([3, 7, 5, 2], seed=2, output="tanh")
    _check_against_dense(net, np.random.default_rng(0).normal(size=(2, 3)))


def _check_against_dense(net, X):
    free = sl.verify(net, X, backend="matrix-free")
    assert free.factor_backend == "matrix-free" and np.all(free.det_certificate)
    h, pattern = _forward(net, X)
    scale = np.maximum(1.0, np.abs(h.free).max(axis=1))
    layout = Layout.from_graph(net.graph)
    op = coboundary_at(net.graph, h.free, pattern, layout)
    rhs = boundary_term(op, X, h.free[:, layout.free(net.graph.output_node)])
    for s in range(X.shape[0]):
        system = assemble(net, X[s])
        assert unit_lower_triangular_certificate(system.delta_free)[0]
        D, boundary = system.delta_free.toarray(), system.delta_boundary @ system.u + system.edge_offset
        np.testing.assert_allclose(rhs[s], -boundary, rtol=1e-12, atol=1e-12 * scale[s])
        dense = np.linalg.solve(D, -boundary)
        assert free.max_deviation[s] <= 1e-9 + np.abs(dense - h.free[s]).max() / scale[s] * 2
        residual = np.linalg.norm(D @ h.free[s] + boundary) / scale[s]
        assert abs(free.discord[s] - residual) <= 1e-12 + 1e-6 * residual
        if max(np.abs(dense - h.free[s]).max() / scale[s], residual) < 1e-12:     # the dense checks pass
            assert free.checks[CHECKS[3]][s] and free.checks[CHECKS[5]][s], str(free)


@given(case=graph_networks(outputs=OUTPUTS, max_layers=3))
@settings(max_examples=6)
def test_the_bounds_bound_what_the_dense_matrices_give(case):
    """``condition_bound`` is above ``cond_2`` of the dense ``delta_Omega``; ``discord_bound`` is the assembled
    path's rounding bound up to the count of a row's entries."""
    net, seed, mode = case
    X = random_inputs(net, seed, 1, mode).reshape(1, -1)
    h, pattern = _forward(net, X)
    D = assemble(net, X).delta_free.toarray()
    state = {**{node.name: h.node(node.name) for node in net.graph.nodes}, INPUT: X}
    assert np.linalg.cond(D, 2) <= condition_bound(net.graph, state) * (1 + 1e-9)
    assembled = sl.verify(net, X, backend="superlu").rounding_bound[CHECKS[5]]
    scale = np.maximum(1.0, np.abs(h.free).max(axis=1))
    bound = discord_bound(net.graph, X, h.free, pattern, scale)
    assert np.all(assembled / 2 <= bound) and np.all(bound <= 3 * assembled)


def test_structure_certificate_agrees_with_the_exact_matrix_one():
    net = random_graph(3, steps=("conv", "residual", "concat", "maxpool", "relu"))
    graph = net.graph
    for reduced in (False, True):
        assert unit_triangular_structure(structure_rows(graph, reduced), Layout.from_graph(graph, reduced)) == (True, "")
    assert unit_lower_triangular_certificate(assemble(net, random_inputs(net, 3, 1)).delta_free)[0]


@pytest.mark.parametrize("change, why", [
    (lambda rows: rows[:-1], "not square"),
    (lambda rows: [(rows[0][0], rows[0][1][:-1] + [("fc", np.array([2.0, 1.0]))])] + rows[1:], "2.0 at 0"),
    (lambda rows: [(rows[0][0], rows[0][1][:-1] + [("fc", np.array([1.0, 1.0 + 2**-52]))])] + rows[1:],
     "not the identity"),
    (lambda rows: [(rows[0][0], rows[0][1][:-1] + [("fc", np.ones(3))])] + rows[1:], "shape (3,)"),
    (lambda rows: [(rows[0][0], rows[0][1][:-1])] + rows[1:], "0 blocks on its own vertex"),
    (lambda rows: [(rows[0][0], rows[0][1] + [("fc", None)])] + rows[1:], "2 blocks on its own vertex"),
    (lambda rows: [(rows[0][0], rows[0][1] + [("r", None)])] + rows[1:], "above the diagonal"),
    (lambda rows: [(rows[0][0], rows[0][1] + [("elsewhere", None)])] + rows[1:], "above the diagonal"),
    (lambda rows: [rows[1], rows[0]] + rows[2:], "not square"),
])
def test_structure_certificate_fails_where_it_must(change, why):
    """Crafted block rows (a network cannot be built with them): no identity diagonal, a block above it."""
    fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((2, 2)), "bias": np.zeros(2)})
    graph = sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])]).graph
    layout = Layout.from_graph(graph)
    passed, reason = unit_triangular_structure(change(structure_rows(graph)), layout)
    assert not passed and why in reason


def test_auto_verifies_matrix_free_when_the_system_does_not_fit(monkeypatch):
    net = random_graph(5, steps=("conv", "relu", "maxpool", "residual"))
    X = random_inputs(net, 5, 2)
    assert sl.verify(net, X).factor_backend != "matrix-free"
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000)
    with pytest.raises(sl.InsufficientMemoryError):
        sl.verify(net, X, backend="superlu")
    report = sl.verify(net, X)
    assert report.factor_backend == "matrix-free" and report.status == "PASSED", str(report)
    assert "0 by structure" in str(report) and "LU solve" not in str(report)


@given(st.integers(0, 10**6), st.floats(1e-8, 1e3))
@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_wrong_forward_pass_reads_failed_matrix_free(monkeypatch, index, relative):
    net = random_graph(index % 7, steps=("conv", "relu", "maxpool", "residual", "concat"))
    X = random_inputs(net, 1, 2).reshape(2, -1)
    module = importlib.import_module("sheaflinalg.sheaf.verification.verify")
    genuine = module.harmonic_extension

    def corrupted(net, X):
        h = genuine(net, X)
        free = h.free.copy()
        free[0, index % free.shape[1]] += relative * max(1.0, np.abs(free[0]).max())
        return sl.HarmonicExtension(free, free[:, h.layout.free("yhat")], h.pattern, h.self_consistent, h.layout)

    monkeypatch.setattr(module, "harmonic_extension", corrupted)
    report = sl.verify(net, X, backend="matrix-free")
    assert report.status == "FAILED", str(report)
    assert not report.checks["global section (discord ~ 0)"][0] and report.checks["global section (discord ~ 0)"][1]


def test_matrix_free_backend_refusals_and_cli(capsys):
    net = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises(ValueError, match="'matrix-free'"):
        sl.verify(net, np.ones((1, 2)), backend="bogus")
    with pytest.raises(ValueError, match="unknown backend 'matrix-free'"):
        sl.verify(net, np.ones((1, 2)), backend="matrix-free", skip_encoding="edges")
    with pytest.raises((TypeError, ValueError), match="progress"):
        sl.verify(net, np.ones((1, 2)), progress="no")
    for extra in ([], ["--no-progress"]):
        assert main(["verify", "--backend", "matrix-free", "--samples", "3"] + extra) == 0
        out = capsys.readouterr().out
        assert "matrix-free (nothing assembled)" in out and "RESULT: PASSED" in out


def test_matrix_free_checks_on_a_chain_equal_the_chain_kernels():
    net = sl.Network.random([3, 7, 5, 2], seed=2, output="tanh")
    X = np.random.default_rng(0).normal(size=(4, 3))
    h, pattern = _forward(net, X)
    c = matrix_free_checks(net.graph, X, h.free, pattern)
    assert c.certificate and np.all(c.deviation <= 1e-14) and np.all(c.discord <= 1e-14)


def test_weights_too_ill_conditioned_to_factor_pass_matrix_free():
    """Weights 1 and 1e8: ``L`` cannot be factored in float64 (assembled: INCONCLUSIVE), but ``det L = 1`` is
    certified by structure and the substitution and the discord hold."""
    net = sl.Network([np.ones((1, 2)), np.array([[1e8]])], [np.zeros(1), np.zeros(1)])
    X = np.abs(np.random.default_rng(0).normal(size=(3, 2)))
    assert sl.verify(net, X).status == "INCONCLUSIVE"
    report = sl.verify(net, X, backend="matrix-free")
    assert report.status == "PASSED" and report.condition_kind == "lower estimate", str(report)
    assert np.all(report.condition >= 1e8) and "cond_2(delta_Omega) >=" in str(report)     # ||delta|| >= 1e8


def test_inputs_near_the_float64_limit_are_checked_not_overflowed():
    """Inputs of 1e300: where the residual's square overflows (here a state wrong by 1e-3 in one coordinate), the
    checks are made again on the state divided by ``max(1, |forward pass|)``, as the assembled path does first."""
    net = sl.Network.random([2, 30, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(2, 2)) * 1e300
    assert sl.verify(net, X, backend="matrix-free").status == "PASSED"
    h, pattern = _forward(net, X)
    free = h.free.copy()
    free[0, 3] += 1e-3 * np.abs(free[0]).max()
    c = matrix_free_checks(net.graph, X, free, pattern)
    assert np.all(np.isfinite(c.discord)) and 1e-4 < c.discord[0] < 1e-2 and c.discord[1] < 1e-14
    assert 1e-4 < c.deviation[0] < 1e-2 and np.all(np.isfinite(c.deviation))


@given(case=graph_networks(outputs=OUTPUTS, max_layers=3))
@settings(max_examples=6)
def test_condition_estimate_of_a_passing_report_is_below_the_dense_condition(case):
    """Where every check passes the report carries a lower estimate of ``cond_2(delta_Omega)``, labelled so:
    at most the dense matrix's, and equal to it once the Lanczos spaces span the whole system."""
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    report = sl.verify(net, X, backend="matrix-free")
    h, pattern = _forward(net, X)
    op = coboundary_at(net.graph, h.free, pattern, Layout.from_graph(net.graph))
    for s in range(2):
        exact = np.linalg.cond(assemble(net, X[s]).delta_free.toarray(), 2)
        if report.condition_kind == "lower estimate":
            assert 1.0 <= report.condition[s] <= exact * (1 + 1e-9)
        assert abs(condition_lower_estimate(op, 2, steps=op.layout.n_free)[s] - exact) <= 1e-6 * exact
    assert ("cond_2(delta_Omega) >=" if report.condition_kind == "lower estimate" else "<=") in str(report)
