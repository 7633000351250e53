"""Residuals and forces of a graph network's sheaf at a state, against the assembled ``delta_Omega``.

At a state ``w`` with the pattern ``P`` read off it, the residuals are ``delta_P (w - w*_P)`` where
``w*_P`` is the harmonic extension under ``P`` (the boundary terms are ``delta_P w*_P``), and the
force is ``-delta_P^T`` of them.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.random_graphs import graph_networks, random_inputs
import sheaflinalg as sl
from sheaflinalg.network import activations
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf, output_adjoint
from sheaflinalg.sheaf.layout import Layout


@settings(max_examples=15, deadline=None)
@given(case=graph_networks(), at_forward=st.booleans())
def test_residuals_and_force_equal_the_assembled_delta(case, at_forward):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    lay = Layout.from_graph(net.graph, reduced=True)
    forward = sl.harmonic_extension(net, X).free[:, :lay.n_free]
    rng = np.random.default_rng(seed)
    w = forward if at_forward else forward + rng.normal(size=forward.shape)
    sheaf = GraphSheaf(net.graph)
    res = sheaf.residuals(X, {node.name: w[:, lay.free(node.name)] for node in net.graph.nodes})
    D = sl.assemble(net, X, pattern=res.pattern, reduced=True).delta_free
    target = sl.harmonic_extension(net, X, pattern=res.pattern).free[:, :lay.n_free]
    e = (D @ (w - target).ravel()).reshape(w.shape)
    got = np.concatenate([res.edges[node.name] for node in net.graph.nodes], axis=1)
    np.testing.assert_allclose(got, e, rtol=1e-10, atol=1e-10)
    force = sheaf.force(res)
    got_force = np.concatenate([force[node.name] for node in net.graph.nodes], axis=1)
    np.testing.assert_allclose(got_force, -(D.T @ e.ravel()).reshape(w.shape), rtol=1e-10, atol=1e-10)
    if at_forward:
        assert np.all(sheaf.energy(res) == 0.0)


@given(seed=st.integers(0, 2**31 - 1), output=st.sampled_from(activations.OUTPUTS))
@settings(max_examples=10, deadline=None)
def test_output_adjoint_is_the_transposed_jacobian(seed, output):
    rng = np.random.default_rng(seed)
    z, e = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    expected = np.stack([activations.jacobian(output, z[s]).T @ e[s] for s in range(3)])
    np.testing.assert_allclose(output_adjoint(output, z, e), expected, rtol=1e-12, atol=1e-14)
