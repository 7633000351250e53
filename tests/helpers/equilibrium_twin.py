"""The dense twin of a graph network's nudged equilibria: the energy's gradient from the definitions.

:func:`check_equilibrium` settles a batch with the library's oracle and checks every settled sample against
one sample's dense coboundary (``helpers/naive_graph.py``) under the pattern read off its state (``z >= 0``,
first maxima), the ties decided by the forward pass at small nudging (:func:`tie_decided`).
"""

import numpy as np

from helpers.naive_graph import coboundary, read_pattern
from helpers.naive_graph import forward as naive_forward
from sheaflinalg.network import activations
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.training.equilibrium.graph import TIES_NUDGING, GraphEquilibrium
from sheaflinalg.training.velocity import GraphParameters


def loss_gradient(output, loss, z, y):
    """``grad L(z)`` of the loss potential, from the definitions (one sample)."""
    p = activations.apply(output, z[None])[0]
    if loss == "cross_entropy":
        return p - y
    return activations.jacobian(output, z).T @ (p - y)


def dense(graph, lay, x, w, pattern=None):
    """``(delta, c, pattern)``: one sample's dense coboundary with ``pattern`` (by default the one read off ``w``:
    first maxima, ``z >= 0``), the full cochain ``c`` of the state, and that pattern."""
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    pattern = read_pattern(graph, values) if pattern is None else pattern
    delta, c, _ = coboundary(graph, lay, x, pattern, reduced=True)
    for node in graph.nodes:
        c[lay.full(node.name)] = values[node.name]
    return delta, c, pattern


def check_equilibrium(net, X, Y, loss, nudging):
    """The nudged equilibria of ``(X, Y)``: on every settled sample the dense energy's gradient vanishes on the
    free coordinates but the held ones (exactly 0, both sides pushing into the surface), and the pattern solved
    under is the one read off the state (at small nudging, a max-pool window tied at the forward pass takes
    the selection solved under when it is one of the tied entries: :func:`tie_decided`)."""
    graph, output = net.graph, net.output
    params = GraphParameters(graph)
    eq = GraphEquilibrium(graph, loss).settle(params.flat(), X, Y, nudging)
    lay = Layout.from_graph(graph, reduced=True)
    assert eq.report.unsettled == int(np.sum(~eq.settled))
    for s in np.flatnonzero(eq.settled):
        w = np.concatenate([eq.values[node.name][s] for node in graph.nodes])
        _, _, pattern = dense(graph, lay, X[s], w)
        if abs(nudging) <= TIES_NUDGING:
            pattern = tie_decided(graph, lay, X[s], w, pattern, {name: p[s] for name, p in eq.pattern.items()})
        delta, c, _ = dense(graph, lay, X[s], w, pattern)
        gradient = delta[:, lay.free_index].T @ (delta @ c)
        out = lay.free(graph.output_node)
        gradient[out] += nudging * loss_gradient(output, loss, w[out], Y[s])
        held = np.zeros(lay.n_free, dtype=bool)
        scale = 1.0 + np.abs(delta).max() * np.abs(c).max()
        for u, j in eq.sliding[s]:
            k = lay.free(u).start + j
            assert w[k] == 0.0
            held[k] = True
            flipped = {name: p.copy() for name, p in pattern.items()}
            for node in graph.nodes:
                if node.op in ("relu", "leaky_relu") and node.inputs[0] == u:
                    flipped[node.name][j] = False
            below, _, _ = coboundary(graph, lay, X[s], flipped, reduced=True)
            assert (below[:, lay.free_index].T @ (below @ c))[k] <= 1e-8 * scale    # both sides push into z = 0
            assert gradient[k] >= -1e-8 * scale
        assert np.abs(gradient[~held]).max() < 1e-8 * scale
        for name in graph.pattern_nodes:       # self-consistent: the pattern solved under is the one read off
            node = graph.node(name)
            z = w[lay.free(node.inputs[0])] if node.inputs[0] != "x" else X[s]
            if node.rule.smooth:               # its point: all its parents' values, settled to rounding
                point = np.concatenate([w[lay.free(u)] if u != "x" else X[s] for u in node.inputs])
                assert node.rule.same_pattern(node, eq.pattern[name][s][None], point[None]).all()
            elif node.op == "maxpool":         # ties: any maximum of the window is the same value
                np.testing.assert_allclose(z[eq.pattern[name][s]], z[pattern[name]], rtol=0, atol=1e-12 * scale)
            elif node.rule.smooth:             # a tangent's point: the state's values, to the iteration's rounding
                np.testing.assert_allclose(eq.pattern[name][s], pattern[name], rtol=0, atol=1e-10 * scale)
            else:
                clear = np.abs(z) > 1e-9 * scale
                np.testing.assert_array_equal(eq.pattern[name][s][clear], pattern[name][clear])
    return eq


def tie_decided(graph, lay, x, w, pattern, solved):
    """``pattern`` with every max-pool window's selection replaced by ``solved``'s where the two entries are
    equal at the (naive) forward pass up to rounding, the solved one moved down from it by the nudging (the
    tie is a sliding mode that the selection solved under stands for), and every rectifier coordinate whose
    pre-activation is 0 at the forward pass taking ``solved``'s side (:func:`zero_decided`)."""
    values, _ = naive_forward(graph, x)
    out = dict(pattern)
    for name in graph.pattern_nodes:
        node = graph.node(name)
        if node.op in ("relu", "leaky_relu"):
            out[name] = zero_decided(graph, lay, x, w, node, values[node.inputs[0]], pattern, solved)
        if node.op == "maxpool":
            u = node.inputs[0]
            f, z = values[u], x if u == "x" else w[lay.free(u)]
            tie = np.abs(f[solved[name]] - f[pattern[name]]) <= 1e-12 * max(1.0, np.abs(f).max())
            kept = tie & (solved[name] != pattern[name])
            assert np.all(z[solved[name][kept]] < f[solved[name][kept]])
            out[name] = np.where(tie, solved[name], pattern[name])
    return out


def zero_decided(graph, lay, x, w, node, f, pattern, solved):
    """The rectifier ``node``'s pattern: ``solved``'s side where its forward pre-activation ``f`` is 0 up to
    rounding, ``pattern``'s elsewhere.  A forward zero left active must not have moved down; one left inactive
    and moved up must be pushed down with it active (dense energy, one coordinate flipped): both sides push into
    the surface, the sliding mode the inactive side stands for."""
    u = node.inputs[0]
    z = x if u == "x" else w[lay.free(u)]
    scale = 1e-12 * max(1.0, np.abs(f).max())
    zero = np.abs(f) <= scale
    side = np.where(zero, solved[node.name], pattern[node.name])
    assert np.all(z[zero & side] >= -scale)
    for j in np.flatnonzero(zero & ~side & (z > scale)):
        flipped = {**pattern, node.name: side.copy()}
        flipped[node.name][j] = True
        delta, c, _ = dense(graph, lay, x, w, flipped)
        k = lay.free(u).start + j
        assert (delta[:, lay.free_index].T @ (delta @ c))[k] >= -1e-8 * (1.0 + np.abs(delta).max() * np.abs(c).max())
    return side
