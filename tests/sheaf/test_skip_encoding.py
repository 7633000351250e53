"""skip_encoding="edges" (the paper's encoding of skip connections) against dense constructions from the definition.

An ``add`` node ``v = u_1 + u_2`` gets the edges ``x_v - x_(u_1)`` and ``x_v - x_(u_2)``;
a ``concat`` node the edges ``P_i x_v - x_(u_i)``; every other edge is the
default encoding's.  ``delta_Omega`` is tall, its harmonic extension the
least-squares solution (numpy's lstsq here), its rank certified
(sheaflinalg/sheaf/verification/rank.py).
"""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from helpers import naive_graph, naive_pins
from helpers.random_graphs import (CNN_STEPS, DENSE_STEPS, EVERY_STEP, graph_networks, random_inputs, random_pattern,
                                  random_pins)
from helpers.strategies import network_input_pattern
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.sheaf.matrix_free.bound import graph_lambda_max_bound
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf
from sheaflinalg.sheaf.patterns import output_jacobian
from sheaflinalg.sheaf.skip_edges.iterative import PreconditionedEdges, iterative_extension, skip_rows
from sheaflinalg.sheaf.skip_edges.least_squares import ITERATIVE_FROM, least_squares_extension, resolved_solver
from sheaflinalg.sheaf.verification.rank import rank_certificate

OUTPUTS = ("identity", "sigmoid", "tanh", "softmax")


def _linear(rng, name, parent, n_out, n_in):
    return Node(name, "linear", [parent], params={"weight": rng.normal(size=(n_out, n_in)),
                                                  "bias": rng.normal(0, 0.3, size=n_out)})


#: Dense networks with skips: additions (projected when the sizes differ, of a node to itself too) and
#: concatenations of any earlier node.
dense_networks = graph_networks(outputs=OUTPUTS, steps=DENSE_STEPS, axes=(0,))
#: Every step but the skips (residual blocks, concatenations, skips from any node).
NO_SKIPS = tuple(s for s in EVERY_STEP if s not in ("residual", "concat", "skip"))


def _skip(node):
    """Whether ``node`` is a skip connection (``add``, ``concat``; a product of two values is not)."""
    return len(node.inputs) > 1 and node.rule.pattern is None


def _has_skips(net):
    return any(_skip(node) for node in net.graph.nodes)


def naive_edges_coboundary(graph, layout, sum_layout, x, pattern, reduced):
    """Dense delta of the edges encoding of one sample, built edge by edge from the definition.

    Nodes with one parent, products of two values and the output edge keep the default encoding's rows (the dense twin
    tests/helpers/naive_graph.py); a node v with several parents gets, for each parent u_i with dense map
    F_i, the edge restricted to the rows R_i that u_i feeds: ``I[R_i] x_v - F_i[R_i] x_(u_i)``."""
    summed, u_full, sum_offset = naive_graph.coboundary(graph, sum_layout, x, pattern, reduced)
    delta = np.zeros((layout.n_edges, layout.n_full))
    offset = np.zeros(layout.n_edges)
    kept = [b.name for b in sum_layout.edge_blocks if b.name in {e.name for e in layout.edge_blocks}]
    for name in kept:
        delta[layout.edge(name)] = summed[sum_layout.edge(name)]
        offset[layout.edge(name)] = sum_offset[sum_layout.edge(name)]
    for node in graph.nodes:
        if not _skip(node):
            continue
        maps, bias = naive_graph.node_dense(node, graph, None)
        for i, (u, F) in enumerate(maps):
            fed = np.flatnonzero(np.any(F != 0, axis=1))
            name = f"e_{node.name}<{u}" + (f"#{i}" if u in node.inputs[:i] else "")
            rows = layout.edge(name)
            assert rows.stop - rows.start == fed.size
            delta[rows, layout.full(u)] -= F[fed]
            delta[rows, layout.full(node.name)] += np.eye(graph.sizes[node.name])[fed]
            if bias is not None and i == 0:
                delta[rows, layout.full(f"1>{node.name}")] -= np.diag(bias)[fed]
    return delta, u_full, offset


def _dense_batch(net, s, X):
    """The dense naive delta of the batch, its free and boundary columns, u and the offset."""
    lay = s.layout
    sum_layout = sl.Layout.from_graph(net.graph, s.reduced)
    parts = [naive_edges_coboundary(net.graph, lay, sum_layout, X[i], {k: v[i] for k, v in s.pattern.items()},
                                    s.reduced) for i in range(X.shape[0])]
    D = scipy.linalg.block_diag(*[p[0] for p in parts])
    M = X.shape[0]
    free = (lay.free_index[None, :] + lay.n_full * np.arange(M)[:, None]).ravel()
    bnd = (lay.boundary_index[None, :] + lay.n_full * np.arange(M)[:, None]).ravel()
    u = np.concatenate([p[1] for p in parts])[bnd]
    return D, free, bnd, u, np.concatenate([p[2] for p in parts])


def _close(a, b, rtol=1e-12):
    a = a.toarray() if sp.issparse(a) else a
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, np.abs(b).max(initial=0.0)))


def _check_against_naive(net, X, reduced=False):
    s = sl.assemble(net, X, reduced=reduced, skip_encoding="edges")
    assert s.skip_encoding == "edges"
    flat = X.reshape(X.shape[0], -1)
    D, free, bnd, u, offset = _dense_batch(net, s, flat)
    _close(s.delta, D)
    _close(s.delta_free, D[:, free])
    _close(s.delta_boundary, D[:, bnd])
    np.testing.assert_array_equal(s.u, u)
    _close(s.edge_offset, offset)
    _close(s.laplacian, D.T @ D)
    _close(s.laplacian_free, D[:, free].T @ D[:, free])
    _close(s.laplacian_boundary, D[:, free].T @ D[:, bnd])
    # an add node gains rows (one edge per parent, each of the child's size); a concat node's edges
    # P_i x_v - x_(u_i) are the rows of its hyperedge, regrouped by parent: the same count
    added = sum((len(n.inputs) - 1) * net.graph.sizes[n.name] for n in net.graph.nodes if n.op == "add")
    assert s.delta_free.shape[0] == s.delta_free.shape[1] + X.shape[0] * added
    if reduced:
        return
    # the least-squares extension is numpy's lstsq of the dense system
    Df = D[:, free]
    w = np.linalg.lstsq(Df, -(D[:, bnd] @ u + offset), rcond=None)[0]
    h = sl.harmonic_extension(net, X, skip_encoding="edges")
    scale = max(1.0, np.abs(w).max()) * max(1.0, np.linalg.cond(Df))
    np.testing.assert_allclose(h.free.ravel(), w, rtol=0, atol=1e-13 * scale)


@given(dense_networks, st.booleans())
def test_residual_and_concat_networks_equal_the_naive_edges_construction(case, reduced):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    _check_against_naive(net, X, reduced)


@settings(max_examples=12)       # every op: the slowest test of the file (the dense twin of every example)
@given(case=graph_networks(outputs=OUTPUTS))
def test_random_graphs_equal_the_naive_edges_construction(case):
    net, seed, mode = case
    _check_against_naive(net, random_inputs(net, seed, 2, mode))


@given(case=graph_networks(steps=NO_SKIPS))
def test_without_add_or_concat_both_encodings_give_the_same_matrices_bit_for_bit(case):
    net, seed, mode = case
    assume(not _has_skips(net))
    _same_bit_for_bit(net, random_inputs(net, seed, 2, mode))


@given(network_input_pattern())
def test_on_a_chain_both_encodings_give_the_same_matrices_bit_for_bit(case):
    net, x, pattern, _ = case
    _same_bit_for_bit(net, np.stack([x, -x]), pattern)
    h = sl.harmonic_extension(net, x, pattern=pattern, skip_encoding="edges")
    f = sl.harmonic_extension(net, x, pattern=pattern)
    np.testing.assert_allclose(h.free, f.free, rtol=0, atol=1e-9 * max(1.0, np.abs(f.free).max()))


def _same_bit_for_bit(net, X, pattern=None):
    for reduced in (False, True):
        a = sl.assemble(net, X, pattern=pattern, reduced=reduced)
        b = sl.assemble(net, X, pattern=pattern, reduced=reduced, skip_encoding="edges")
        assert [e.name for e in a.layout.edge_blocks] == [e.name for e in b.layout.edge_blocks]
        for attr in ("delta", "delta_free", "delta_boundary", "laplacian", "laplacian_free", "laplacian_boundary"):
            for part in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(getattr(a, attr), part), getattr(getattr(b, attr), part),
                                              err_msg=attr)
        np.testing.assert_array_equal(a.u, b.u)
        np.testing.assert_array_equal(a.edge_offset, b.edge_offset)


def _tiny_residual():
    """``s = fc(x) + x`` with ``fc(x) = 2 x``: the forward pass gives fc = 2, s = 3 at x = 1."""
    fc = Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [0.0]})
    return sl.Network.from_nodes((1,), [fc, Node("s", "add", ["fc", "x"])])


def test_the_least_squares_extension_differs_from_the_forward_pass_on_a_residual_net():
    # edges fc - 2x, s - fc, s - x, yhat - s at x = 1: the normal equations 2 fc - s = 2, 2 s - fc = 1
    # give fc = 5/3 and s = yhat = 4/3, against the forward pass's 2 and 3.
    net = _tiny_residual()
    h = sl.harmonic_extension(net, [[1.0]], skip_encoding="edges")
    np.testing.assert_allclose(h.free[0], [5 / 3, 4 / 3, 4 / 3], rtol=1e-14)
    report = sl.verify(net, [[1.0]], skip_encoding="edges")
    assert report.status == "PASSED" and report.certificates[0].method == "structural"
    np.testing.assert_allclose(report.forward_distance, [(3 - 4 / 3) / 3], rtol=1e-13)
    assert report.discord[0] > 0.1
    assert "RESULT: PASSED" in str(report)


@given(dense_networks)
def test_the_certificate_holds_on_residual_and_concat_networks(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    report = sl.verify(net, X, skip_encoding="edges")
    assert report.status == "PASSED"
    assert all(c.method == "structural" for c in report.certificates)
    assert np.all(np.isfinite(report.forward_distance)) and np.all(report.forward_distance >= 0)
    # the numerical path certifies the same matrices once no entry is exactly 1 (scaled by 2)
    D = sl.assemble(net, X[0], skip_encoding="edges").delta_free
    numerical = rank_certificate(D * 2.0)
    assert numerical.method == "numerical" and numerical.certified
    lam = np.linalg.eigvalsh((D.T @ D).toarray())[0]
    assert numerical.lambda_min == pytest.approx(4 * lam, rel=1e-6, abs=numerical.bound)


@given(network_input_pattern(max_hidden=3, max_width=6))
def test_on_a_chain_the_distance_from_the_forward_pass_is_rounding(case):
    net, x, _, _ = case
    report = sl.verify(net, x, skip_encoding="edges")
    assert report.status == "PASSED"
    assert report.forward_distance[0] < 1e-9 and report.discord[0] < 1e-9


def test_edges_of_a_node_with_a_repeated_parent_are_named_apart():
    rng = np.random.default_rng(0)
    net = sl.Network.from_nodes((2,), [_linear(rng, "l", "x", 2, 2), Node("s", "add", ["l", "l", "x"]),
                                       Node("c", "concat", ["s", "x"], {"axis": 0})])
    lay = sl.assemble(net, [0.5, -1.0], skip_encoding="edges").layout
    assert [(b.name, b.size) for b in lay.edge_blocks] == [
        ("e_l", 2), ("e_s<l", 2), ("e_s<l#1", 2), ("e_s<x", 2), ("e_c<s", 2), ("e_c<x", 2), ("e_y", 4)]
    assert sl.Layout.from_graph(net.graph, skip_encoding="edges").edge("e_c<x") == slice(10, 12)


@pytest.mark.parametrize("call", [
    lambda net, bad: sl.assemble(net, [1.0], skip_encoding=bad),
    lambda net, bad: sl.harmonic_extension(net, [1.0], skip_encoding=bad),
    lambda net, bad: sl.verify(net, [1.0], skip_encoding=bad),
    lambda net, bad: sl.Layout.from_graph(net.graph, skip_encoding=bad),
])
@pytest.mark.parametrize("bad", ["hyperedges", None, ["edges"]])
def test_an_unknown_skip_encoding_is_refused_listing_the_choices(call, bad):
    with pytest.raises(ValueError, match="skip_encoding .*expected one of 'sum', 'edges'"):
        call(_tiny_residual(), bad)


def test_concatenations_alone_keep_the_forward_pass():
    # a concat's edges P_i x_v - x_(u_i) are its hyperedge's rows regrouped: square, and solved exactly
    rng = np.random.default_rng(3)
    net = sl.Network.from_nodes((3,), [_linear(rng, "l", "x", 2, 3), Node("c", "concat", ["l", "x"], {"axis": 0}),
                                       Node("r", "relu", ["c"]), _linear(rng, "head", "r", 2, 5)])
    X = rng.uniform(-2, 2, size=(4, 3))
    s = sl.assemble(net, X, skip_encoding="edges")
    assert s.delta_free.shape[0] == s.delta_free.shape[1]
    report = sl.verify(net, X, skip_encoding="edges")
    assert report.status == "PASSED" and np.all(report.forward_distance < 1e-12)


# ------------------------------------------------------- the preconditioned iterative solver (solver="iterative")
def _check_iterative(net, X, pattern=None):
    """The iterative extension against numpy's lstsq of the naive dense system and against the direct solve."""
    s = sl.assemble(net, X, pattern=pattern, skip_encoding="edges")
    D, free, bnd, u, offset = _dense_batch(net, s, X.reshape(X.shape[0], -1))
    Df = D[:, free]
    w = np.linalg.lstsq(Df, -(D[:, bnd] @ u + offset), rcond=None)[0]
    h = sl.harmonic_extension(net, X, pattern=pattern, skip_encoding="edges", solver="iterative")
    direct = sl.harmonic_extension(net, X, pattern=pattern, skip_encoding="edges", solver="direct")
    scale = max(1.0, np.abs(w).max()) * max(1.0, np.linalg.cond(Df))
    np.testing.assert_allclose(h.free.ravel(), w, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(h.free, direct.free, rtol=0, atol=1e-11 * scale)
    np.testing.assert_array_equal(h.output, h.free[:, h.layout.free("yhat")])
    assert [b.name for b in h.layout.edge_blocks] == [b.name for b in s.layout.edge_blocks]


@settings(max_examples=15)
@given(dense_networks)
def test_the_iterative_solver_equals_the_naive_least_squares_on_residual_and_concat_networks(case):
    net, seed, mode = case
    _check_iterative(net, random_inputs(net, seed, 2, mode))


@settings(max_examples=6)
@given(case=graph_networks(outputs=OUTPUTS, steps=CNN_STEPS, max_layers=4))
def test_the_iterative_solver_equals_the_naive_least_squares_on_residual_cnns(case):
    net, seed, mode = case
    _check_iterative(net, random_inputs(net, seed, 2, mode))


@settings(max_examples=4)
@given(case=graph_networks(outputs=OUTPUTS, max_layers=4), frozen=st.booleans())
def test_the_iterative_solver_equals_the_naive_least_squares_on_random_graphs(case, frozen):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    pattern = random_pattern(net, np.random.default_rng(seed), 2) if frozen else None
    _check_iterative(net, X, pattern)


@given(dense_networks)
def test_the_preconditioned_normal_operator_has_its_spectrum_in_one_to_one_plus_norm_k_squared(case):
    # B^T B = I + K^T K, K = E T^{-1}: every eigenvalue >= 1, at least n - m_E of them equal to 1, and T is the
    # square block of delta_Omega's rows (T^{-1} inverts T, its rows are rows of the dense system)
    net, seed, mode = case
    X = random_inputs(net, seed, 1, mode)
    h = net.evaluate(X)
    op = PreconditionedEdges(net.graph, h.pattern, output_jacobian(net.output, h.values[net.graph.output_node]))
    n = op.layout.n_free
    K = op.k(np.eye(n))               # rows: K applied to each unit vector, i.e. K^T
    KT = op.k_transpose(np.eye(op.n_extra)) if op.n_extra else np.zeros((0, n))
    np.testing.assert_allclose(K, KT.T, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(K).max(initial=0.0)))
    eig = np.linalg.eigvalsh(np.eye(n) + K @ K.T)
    assert eig[0] >= 1 - 1e-9 * eig[-1]
    assert np.sum(np.abs(eig - 1) <= 1e-9 * eig[-1]) >= n - op.n_extra
    Tm = op.T.apply(np.eye(n)).T      # T by columns
    s = sl.assemble(net, X, skip_encoding="edges")
    D = s.delta_free.toarray()
    rows = {tuple(np.round(r, 12)) for r in D}
    assert all(tuple(np.round(r, 12)) in rows for r in Tm)
    np.testing.assert_allclose(op.T.solve(Tm.T).T, np.eye(n), atol=1e-9 * max(1.0, np.abs(Tm).max()))


def test_an_add_node_puts_its_shortcut_in_the_square_block():
    # s = fc(x) + x: the shortcut x (depth 0) feeds T, the branch fc (depth 1) is the extra row
    (fed_fc, mask_fc, extra_fc), (fed_x, mask_x, extra_x) = skip_rows(_tiny_residual().graph)["s"]
    assert mask_fc.tolist() == [0.0] and extra_fc.tolist() == [0]
    assert mask_x.tolist() == [1.0] and extra_x.size == 0


def test_auto_picks_the_direct_solver_on_small_systems_and_chains():
    assert resolved_solver(_tiny_residual(), "auto") == "direct"
    assert resolved_solver(_tiny_residual(), "iterative") == "iterative"
    assert resolved_solver(sl.Network.random([2, 3, 1], seed=0), "iterative") == "direct"
    big = sl.Network.from_nodes((ITERATIVE_FROM,), [Node("r", "relu", ["x"]), Node("s", "add", ["r", "x"])])
    assert resolved_solver(big, "auto") == "iterative"


def test_the_iterative_solver_refuses_bad_options_and_reports_no_convergence():
    net = _tiny_residual()
    for bad in ("cg", None):
        with pytest.raises(ValueError, match="solver .*expected one of 'auto', 'direct', 'iterative'"):
            sl.harmonic_extension(net, [1.0], skip_encoding="edges", solver=bad)
    with pytest.raises(ValueError, match="solver"):
        sl.harmonic_extension(net, [1.0], solver="cg")
    with pytest.raises(ValueError, match="tol must be a finite number > 0"):
        least_squares_extension(net, [1.0], solver="iterative", tol=0.0)
    with pytest.raises(np.linalg.LinAlgError, match="did not reach"):
        iterative_extension(net.graph, np.array([[1.0]]), maxiter=1)
    h, report = iterative_extension(net.graph, np.array([[1.0], [0.0]]))
    assert report.n_extra == 1 and np.all(report.relative <= 1e-13) and report.relative[1] == 0
    np.testing.assert_allclose(h.free, [[5 / 3, 4 / 3, 4 / 3], [0, 0, 0]], rtol=1e-14)


# ------------------------------------------------------- pins and completion under "edges"
def _naive_pinned(net, x, s):
    """The naive dense pinned system of one sample under "edges": the edges twin above with the pins, soft pins and
    reluctance of the assembled ``s`` moved and appended by tests/helpers/naive_pins.py."""
    lay = s.layout
    D, u_full, offset = naive_edges_coboundary(net.graph, lay, sl.Layout.from_graph(net.graph, s.reduced), x,
                                               {k: v[0] for k, v in s.pattern.items()}, s.reduced)
    free = np.zeros(lay.n_full, dtype=bool)
    free[lay.free_index] = True
    ref = {"delta": D, "free": free, "u": u_full[~free], "edge_offset": offset}
    soft, hard = s.soft_pins, s.hard_pins
    anchor = np.zeros(lay.n_free)
    return naive_pins.naive_augmented(ref, x, hard.index, hard.values[0], soft.index, soft.values[0], soft.gamma,
                                      s.reluctance, anchor, s.free_inputs)


@settings(max_examples=6)
@given(dense_networks)
def test_pins_and_completion_under_edges_equal_the_naive_pinned_least_squares(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 1, mode)
    rng = np.random.default_rng(seed)
    pins, soft, lam = random_pins(net, sl.Layout.from_graph(net.graph), rng, 1)
    pattern = net.evaluate(X).pattern
    c = sl.complete(net, X, pins=pins, soft_pins=soft, reluctance=lam, pattern=pattern, skip_encoding="edges")
    options = dict(pattern=pattern, pins=pins or {}, soft_pins=soft, reluctance=lam, skip_encoding="edges",
                   reduced=c.layout.reduced)
    s = sl.assemble(net, X, **options)
    Df, Db, u, offset, _ = _naive_pinned(net, X[0], s)
    _close(s.delta_free, Df)
    _close(s.delta_boundary, Db)
    np.testing.assert_allclose(s.u, u, rtol=1e-15)
    if net.output != "identity" and not s.reduced:
        # a nonlinear output is re-linearised at the completion's own z (Gauss-Newton): a fixed point there
        s = sl.assemble(net, X, linearise_at=c.state[:, c.layout.free(net.graph.output_node)], **options)
        Df, Db, u, offset = s.delta_free.toarray(), s.delta_boundary.toarray(), s.u, s.edge_offset
    w = np.linalg.lstsq(Df, -(Db @ u + offset), rcond=None)[0]
    scale = max(1.0, np.abs(w).max()) * max(1.0, np.linalg.cond(Df))
    np.testing.assert_allclose(c.state[0, s.layout_free_index], w, rtol=0, atol=1e-11 * scale)
    assert c.unique and c.method == "cholesky"      # settled only if the pattern read off the result is the frozen one
    if pins is None and soft is None and lam is None and net.output == "identity":   # the extension
        h = sl.harmonic_extension(net, X, pattern=pattern, skip_encoding="edges", solver="iterative")
        np.testing.assert_allclose(c.state, h.free[:, :c.state.shape[1]], rtol=0, atol=1e-11 * scale)


def test_a_completion_under_edges_reads_its_pattern_off_the_least_squares_state():
    # s = relu(fc(x)) + x, fc(x) = 2x - 1.  At x = 2 the edges fc - 3, r - fc, s - r, s - 2 are solved by the
    # chain 3, 2.75, 2.5, 2.25 (equal steps); a pin s = 4 gives fc, r = 10/3, 11/3.  A pin s = -5 at x = 1 pulls fc
    # to -1 (dead), where the dead ReLU lets fc return to 1 (active): the pattern cycles, not settled.
    fc = Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [-1.0]})
    net = sl.Network.from_nodes((1,), [fc, Node("r", "relu", ["fc"]), Node("s", "add", ["r", "x"])])
    c = sl.complete(net, [[2.0]], skip_encoding="edges")
    assert c.settled and c.iterations == 1
    np.testing.assert_allclose(c.state, [[2.75, 2.5, 2.25]], rtol=1e-13)
    h = sl.harmonic_extension(net, [[2.0]], skip_encoding="edges", solver="iterative")
    np.testing.assert_allclose(h.free, [[2.75, 2.5, 2.25, 2.25]], rtol=1e-13)
    pinned = sl.complete(net, [[2.0]], pins={"s": [[4.0]]}, skip_encoding="edges")
    assert pinned.settled and pinned.state[0, 2] == 4.0
    np.testing.assert_allclose(pinned.state[0, :2], [10 / 3, 11 / 3], rtol=1e-13)
    cycling = sl.complete(net, [[1.0]], pins={"s": [[-5.0]]}, skip_encoding="edges")
    assert not cycling.settled and cycling.iterations > 1
    with pytest.raises(ValueError, match="skip_encoding"):
        sl.complete(net, [[1.0]], skip_encoding="edge")


# ------------------------------------------------------- heat under "edges": residuals, force, bound, the flow
@settings(max_examples=10)
@given(dense_networks)
def test_the_state_residuals_and_force_under_edges_equal_the_naive_edges_coboundary(case):
    # at a random state, with the pattern read off it: every edge's residual is (D w)_e of the naive edges twin
    # and the force is -(D_Omega^T D w) (output edge excluded: the reduced system)
    net, seed, mode = case
    x = random_inputs(net, seed, 1, mode).reshape(1, -1)
    lay = sl.Layout.from_graph(net.graph, reduced=True, skip_encoding="edges")
    w = np.random.default_rng(seed).normal(size=(1, lay.n_free))
    sheaf = GraphSheaf(net.graph, "edges")
    res = sheaf.residuals(x, {b.name: w[:, b.slice] for b in lay.free_blocks})
    D, u_full, _ = naive_edges_coboundary(net.graph, lay, sl.Layout.from_graph(net.graph, True), x[0],
                                          {k: v[0] for k, v in res.pattern.items()}, True)
    full = u_full.copy()
    full[lay.free_index] = w[0]
    e = D @ full
    assert set(res.edges) == {b.name[2:] for b in lay.edge_blocks}
    for b in lay.edge_blocks:
        np.testing.assert_allclose(res.edges[b.name[2:]][0], e[lay.edge(b.name)], rtol=1e-12, atol=1e-12)
    force = sheaf.force(res)
    expected = -(D[:, lay.free_index].T @ e)
    for b in lay.free_blocks:
        np.testing.assert_allclose(force[b.name][0], expected[b.slice], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(sheaf.energy(res), [0.5 * e @ e], rtol=1e-12)
    # the bound on lambda_max holds for the pattern there (any pattern: the maps' norms over every pattern)
    L = D[:, lay.free_index].T @ D[:, lay.free_index]
    assert np.linalg.eigvalsh(L)[-1] <= graph_lambda_max_bound(net.graph, skip_encoding="edges") * (1 + 1e-12)


def test_heat_under_edges_settles_at_the_least_squares_state_and_holds_pins():
    # the network of the completion test above: the flow reaches the chain 2.75, 2.5, 2.25 (and, pinned s = 4,
    # the completion's 10/3, 11/3), where the default encoding's flow reaches the forward pass 3, 3, 5
    fc = Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [-1.0]})
    net = sl.Network.from_nodes((1,), [fc, Node("r", "relu", ["fc"]), Node("s", "add", ["r", "x"])])
    options = dict(dt=0.1, tol=1e-14, init="zeros", progress=False)
    res = sl.heat(net, [[2.0]], skip_encoding="edges", record_every=50, **options)
    assert res.converged
    np.testing.assert_allclose(res.state, [[2.75, 2.5, 2.25]], rtol=1e-11)
    assert [b.name for b in res.layout.edge_blocks] == ["e_fc", "e_r", "e_s<r", "e_s<x"]
    np.testing.assert_allclose(sl.heat(net, [[2.0]], **options).state, [[3.0, 3.0, 5.0]], rtol=1e-11)
    pinned = sl.heat(net, [[2.0]], pins={"s": [[4.0]]}, skip_encoding="edges", **options)
    np.testing.assert_allclose(pinned.state, [[10 / 3, 11 / 3, 4.0]], rtol=1e-11)
    with pytest.raises(ValueError, match=r"method='implicit'\) takes skip_encoding='sum' only"):
        sl.heat(net, [[2.0]], method="implicit", skip_encoding="edges", progress=False)
    with pytest.raises(ValueError, match="skip_encoding .*expected one of 'sum', 'edges'"):
        sl.heat(net, [[2.0]], skip_encoding="edge", progress=False)
