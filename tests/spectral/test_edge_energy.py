"""The edge energies of an eigenvector (sheaflinalg.spectral.edge_energy) against the dense coboundary of the
definitions: per edge ``||(delta v)_e||^2``, summing to the eigenvalue."""

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.naive_graph import coboundary
from helpers.random_graphs import graph_networks, random_inputs
import sheaflinalg as sl
from sheaflinalg.network import activations


@settings(max_examples=6, deadline=None)
@given(case=graph_networks(outputs=activations.OUTPUTS, steps=("conv", "relu", "maxpool", "residual", "linear")))
def test_the_edge_energies_are_the_dense_coboundarys_and_sum_to_the_eigenvalue(case):
    net, seed, mode = case          # all modes: all active, all dead, mixed, max-pool ties
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    system = "reduced" if seed % 2 or net.output == "identity" else "free"
    sp = sl.spectrum(net, X, system=system, method="dense", progress=False)
    lay = sp.layout
    for which, values in (("smallest", sp.lambda_min), ("largest", sp.lambda_max)):
        energy = sl.spectral.edge_energy(net, X, sp, which)
        np.testing.assert_allclose(sum(energy.values()), values, rtol=1e-8, atol=1e-12)
        for s in range(2):
            pattern = {n: p[0] for n, p in sl.harmonic_extension(net, X[s:s + 1]).pattern.items()}
            delta, _, _ = coboundary(net.graph, lay, X[s], pattern, reduced=system == "reduced")
            edges = delta[:, lay.free_index] @ sp._vectors(which, 0)[s]
            for b in lay.edge_blocks:
                name = b.name if b.name == "e_y" else b.name[2:]
                np.testing.assert_allclose(energy[name][s], np.sum(edges[b.slice] ** 2), rtol=1e-8, atol=1e-12)


def test_edge_energy_refuses_a_chain_and_a_wrong_batch():
    net = sl.Network.random([2, 4, 1], seed=0)
    with pytest.raises(ValueError, match="graph network"):
        sl.spectral.edge_energy(net, np.ones((1, 2)), sl.spectrum(net, np.ones((1, 2)), progress=False))
    conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
                   {"weight": np.ones((2, 1, 2)), "bias": np.zeros(2)})
    graph = sl.Network.from_nodes((1, 4), [conv, sl.Node("r", "relu", ["c"])])
    sp = sl.spectrum(graph, np.ones((2, 4)), progress=False)
    with pytest.raises(ValueError, match="3 samples but the spectrum has 2"):
        sl.spectral.edge_energy(graph, np.ones((3, 4)), sp)
