"""Groups of max-pool entries over dead ReLUs held as one coordinate (sheaflinalg/sheaf/matrix_free/dead_levels.py)
against the dense minimiser with every group's entries constrained equal, written from the definitions."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.naive_graph import coboundary
import sheaflinalg as sl
from sheaflinalg.discord.pinning import graph as pinning
from sheaflinalg.network.graph import Node
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.sheaf.matrix_free.dead_levels import collapse


def _stem(seed, bias, second_reader=False):
    """``conv -> relu -> maxpool(3, stride 2) -> flatten -> linear`` (``second_reader``: the ReLU read by a
    second node as well, added into the head's input)."""
    rng = np.random.default_rng(seed)
    C, H = 2, int(rng.integers(5, 8))
    conv = Node("conv", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                {"weight": rng.normal(0, 0.5, size=(C, 1, 3, 3)), "bias": np.full(C, bias)})
    pool = Node("pool", "maxpool", ["relu"], {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1})
    nodes = [conv, Node("relu", "relu", ["conv"]), pool]
    probe = sl.Network.from_nodes((1, H, H), nodes)
    n = probe.graph.sizes["pool"]
    nodes.append(Node("flat", "reshape", ["pool"], {"shape": (n,)}))
    if second_reader:
        nodes += [Node("pool2", "avgpool", ["relu"], {"kernel_size": 3, "stride": 2, "padding": 1,
                                                          "count_include_pad": True}),
                  Node("flat2", "reshape", ["pool2"], {"shape": (n,)}), Node("both", "add", ["flat", "flat2"])]
    head = Node("head", "linear", [nodes[-1].name], params={"weight": rng.uniform(-1.0, 1.0, size=(2, n)),
                                                            "bias": np.zeros(2)})
    return sl.Network.from_nodes((1, H, H), nodes + [head])


def _constrained(net, lay, x, pattern, y, groups):
    """The minimiser of ``||delta w + c||^2`` over the free coordinates with the output at ``y`` and every group's
    entries of ``relu`` equal, from the dense coboundary: one unknown per group, per other free coordinate."""
    delta, u, _ = coboundary(net.graph, lay, x, pattern, reduced=True)
    D = delta[:, lay.free_index]
    out = np.arange(lay.free(net.graph.output_node).start, lay.free(net.graph.output_node).stop)
    unknown = np.full(lay.n_free, -1)
    rest = np.setdiff1d(np.arange(lay.n_free), np.concatenate([out] + [lay.free("relu").start + g for g in groups]))
    unknown[rest] = np.arange(rest.size)
    for k, g in enumerate(groups):
        unknown[lay.free("relu").start + g] = rest.size + k
    N = np.zeros((lay.n_free, rest.size + len(groups)))
    N[np.flatnonzero(unknown >= 0), unknown[unknown >= 0]] = 1.0
    p = np.linalg.lstsq(D @ N, -(delta @ u + D[:, out] @ y), rcond=None)[0]
    w = N @ p
    w[out] = y
    return w


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bias=st.sampled_from([-5.0, -0.3]), second_reader=st.booleans(),
       conjugate=st.booleans())
def test_a_frozen_solve_with_dead_groups_collapsed_is_the_dense_constrained_minimiser(seed, bias, second_reader,
                                                                                     conjugate):
    net = _stem(seed, bias, second_reader)      # bias -5: every ReLU dead; -0.3: groups with active entries too
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1, net.n_inputs))
    y = net.forward(x) + rng.normal(0, 0.5, size=(1, 2))
    pattern = evaluate(net.graph, x).pattern
    n = net.graph.sizes["relu"]
    groups = np.array_split(rng.permutation(n)[: rng.integers(2, n)], rng.integers(1, 4))
    groups = [np.sort(g) for g in groups if g.size >= 2]
    surface = [("relu", int(g[0]), int(j)) for g in groups for j in g[1:]]
    solve = pinning._MatrixFree(net.graph, pinning.GraphSheaf(net.graph).maps)
    solve.LOOSE = None              # to the tolerance (the groups are arbitrary: no pattern reads them back)
    if conjugate:
        solve.DIRECT_K = 0
    got = solve(x, y, pattern, surface)[0]
    want = _constrained(net, solve.layout, x[0], {k: v[0] for k, v in pattern.items()}, y[0], groups)
    np.testing.assert_allclose(got, want, atol=1e-8 * (1.0 + np.abs(want).max()))
    done = collapse(net.graph, solve.layout, pattern, surface)
    dead = [g for g in groups if not pattern["relu"][0, g].any()]
    assert done.n_groups == (0 if second_reader else len(dead))     # a second reader keeps every pair
    assert len(done.surface) == len(surface) - (0 if second_reader else sum(g.size - 1 for g in dead))


def test_a_collapsed_group_reads_one_entry_through_scaled_maps_and_keeps_mask_coordinates():
    net = _stem(0, -5.0)
    lay = pinning.Layout.from_graph(net.graph, reduced=True)
    pattern = evaluate(net.graph, np.ones((1, net.n_inputs))).pattern
    done = collapse(net.graph, lay, pattern, [("conv", 3), ("relu", 0, 1), ("relu", 1, 7)])
    assert done.surface == [("conv", 3)]
    start = lay.free("relu").start
    assert done.n_groups == 1 and done.entries.tolist() == [start + e for e in (0, 1, 7)]
    assert done.first.tolist() == [start] * 3 and done.size.tolist() == [3] * 3
    reading = np.isin(pattern["pool"][0], [0, 1, 7])
    assert np.all(done.pattern["pool"][0][reading] == 0)
    np.testing.assert_allclose(done.rows["pool"][0][0], np.where(reading, 3 ** -0.5, 1.0))
    assert pattern["pool"] is not done.pattern["pool"]            # the caller's pattern is left alone
