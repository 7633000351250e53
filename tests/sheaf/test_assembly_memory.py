"""The assembly's memory estimate (sheaf/assembled/assembly.py): an upper bound on what it builds, and a
refusal naming the nodes of dense blocks (attention, normalisations) while the matrix-free paths work."""

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.graph_examples import attention_block
from helpers.random_graphs import graph_networks, random_inputs
import sheaflinalg as sl
from sheaflinalg._common import memory
from sheaflinalg.sheaf.assembled.assembly import edge_nnz
from sheaflinalg.sheaf.layout import Layout


def _pairs(D):
    """Nonzeros of ``|D|^T |D|``: ``D^T D``'s pattern without cancellations."""
    A = abs(D).tocsr()
    return (A.T @ A).nnz


@settings(max_examples=25, deadline=None)
@given(case=graph_networks(outputs=("identity", "sigmoid", "softmax")))
def test_the_estimate_bounds_every_edges_entries_and_laplacian_pairs(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    system = sl.assemble(net, X)
    lay, delta = system.layout, system.delta.tocsr()
    estimate = edge_nnz(net.graph)
    for edge, (entries, pairs) in estimate.items():
        rows = lay.edge(edge if edge == "e_y" else f"e_{edge}")
        block = delta[np.r_[rows.start:rows.stop, lay.n_edges + rows.start:lay.n_edges + rows.stop]]
        assert block.nnz <= 2 * entries and _pairs(block) <= 2 * pairs, edge
    assert system.laplacian.nnz <= 2 * sum(pairs for _, pairs in estimate.values())


def test_a_long_attention_block_is_refused_for_assembly_and_works_matrix_free(monkeypatch):
    net = attention_block(T=256, heads=2, d_head=4)
    X = np.random.default_rng(0).normal(size=(1, 256 * 8))
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**30)
    message = (r"the sparse sheaf system of 1 samples \(largest: node 'mixed' \(matmul\) [\d.]+ GiB, node 'weights' "
               r"\(softmax\) [\d.]+ GiB, .*\): about [\d.]+ GiB needed but only 1 GiB of memory is available; "
               r"harmonic_extension, heat and spectrum\(method='arpack'\) without pins work matrix-free")
    for call in (lambda: sl.assemble(net, X), lambda: sl.verify(net, X, backend="superlu"),
                 lambda: sl.spectrum(net, X, k=1, pins={"ln[0]": 0.0}, progress=False)):
        with pytest.raises(sl.InsufficientMemoryError, match=message):
            call()
    report = sl.verify(net, X)                       # "auto": the certificate without the matrix
    assert report.status == "PASSED" and report.factor_backend == "matrix-free"
    free = sl.harmonic_extension(net, X).free
    np.testing.assert_allclose(free[:, Layout.from_graph(net.graph).free("out")], net.forward(X), rtol=1e-12)
    res = sl.heat(net, X, dt=0.1, max_steps=3, tol=0.0, seed=0, record_every=1, progress=False)
    energy = res.history.discord.sum(axis=1)
    assert res.steps == 3 and np.all(np.diff(energy) < 0)
    top = sl.spectrum(net, X, k=1, method="arpack", progress=False)
    assert np.isfinite(top.largest).all()


def test_a_short_attention_block_still_assembles():
    net = attention_block(T=5, heads=2, d_head=3)
    X = np.random.default_rng(0).normal(size=(2, 30))
    system = sl.assemble(net, X, reduced=True)
    n = system.layout.n_free
    assert system.laplacian_free.shape == (2 * n, 2 * n)
    assert sl.verify(net, X).passed
