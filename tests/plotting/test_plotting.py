"""Every figure of ``sheaflinalg.plotting`` drawn in one session that has a pyplot figure of its own:
the library leaves matplotlib's backend, ``rcParams`` and pyplot's figures exactly as they were."""

import importlib
import inspect
import pkgutil
from types import SimpleNamespace

import numpy as np
import pytest

import sheaflinalg as sl
import sheaflinalg.plotting

matplotlib = pytest.importorskip("matplotlib")

PLOTTING = [importlib.import_module(m.name) for m in pkgutil.iter_modules(sheaflinalg.plotting.__path__,
                                                                          "sheaflinalg.plotting.")]


def _figure_functions():
    """``{name: function}`` of every public figure-drawing function of the plotting modules."""
    return {name: fn for module in PLOTTING for name, fn in inspect.getmembers(module, inspect.isfunction)
            if fn.__module__ == module.__name__ and (name.startswith("plot_") or name.endswith("_figure"))
            and module.__name__ != "sheaflinalg.plotting.figure"}


def _draw_every_figure(tmp_path):
    """Draw each figure once (with ``path=`` where it takes one); returns the names drawn."""
    from helpers.graph_examples import every_op_network
    from sheaflinalg.plotting import case_study, discord, exact, graph, heat, spectral, survey, sweep, training

    net = sl.Network.random([2, 4, 1], seed=0)
    x = [[0.5, -1.0]]
    res = sl.heat(net, x, dt=0.01, record_every=1, record_states=[0], seed=1, progress=False)
    ex = sl.heat(net, x, method="exact", seed=1)
    X, Y = sl.tasks.paraboloid(30, seed=0)
    sp = sl.spectrum(sl.Network.random([2, 6, 1], seed=0), X[:3], full=True)
    tracker = sl.SpectralTracker(X[:4])
    for step in range(2):
        tracker(SimpleNamespace(method="sgd", epoch=step, step=step, network=net, X=X[:4]))
    hist = sl.sgd(sl.Network.random([2, 4, 1]), X, Y, epochs=20, progress=False).history
    cnn = every_op_network()
    Xc = np.random.default_rng(0).normal(size=(2, cnn.n_inputs))
    row = {"task": "paraboloid", "X": X, "Y": Y, "target": lambda Z: sl.tasks.target_function("paraboloid", Z),
           "sheaf": net, "sgd": net}
    drawn = {
        "plot_convergence": heat.plot_convergence(res, forward=net.forward(x), path=tmp_path / "c.png"),
        "plot_phase_plane": heat.plot_phase_plane(res, neurons=(0, 2), path=tmp_path / "p.pdf"),
        "plot_exact_phase_plane": exact.plot_exact_phase_plane(ex, neurons=(0, 2), path=tmp_path / "e.png"),
        "plot_exact_convergence": exact.plot_exact_convergence(ex),
        "plot_convergence_study": exact.plot_convergence_study(sl.convergence_study(net, x, dts=(0.02, 0.01),
                                                                                    times=(1.0,))),
        "plot_curves": training.plot_curves([hist]),
        "plot_learned_outputs": training.plot_learned_outputs([row], path=tmp_path / "l.png"),
        "plot_spectra": spectral.plot_spectra(sp),
        "plot_block_energy": spectral.plot_block_energy(sp),
        "plot_tracking": spectral.plot_tracking(tracker),
        "plot_histogram": spectral.plot_histogram([sp]),
        "spectra_figure": spectral.spectra_figure(sp, path=tmp_path / "s.png"),
        "plot_residuals": discord.plot_residuals(sl.discord.pinned(net, X, Y), path=tmp_path / "r.png"),
        "plot_node_discord": discord.plot_node_discord(sl.discord.pinned(cnn, Xc, cnn.forward(Xc) + 0.1),
                                                       path=tmp_path / "n.png"),
        "plot_graph": graph.plot_graph(every_op_network(), path=tmp_path / "g.png"),
        "plot_groups": case_study.plot_groups({"a": np.arange(1.0, 4.0), "b": np.array([])}, ylabel="y"),
        "plot_node_profile": case_study.plot_node_profile(["a", "b"], {"x": np.ones((3, 2)), "y": np.zeros((0, 2))},
                                                          log=True),
        "plot_channel_map": case_study.plot_channel_map({"a": np.arange(4.0), "b": np.zeros(4)}, log=True),
        "plot_training_record": case_study.plot_training_record([1.0, 0.5], [0.2, 0.4]),
        "plot_survey": survey.plot_survey(sl.survey(sl.Network.random([2, 4, 2], seed=0), X[:3], [0, 1, 1],
                                                    store=str(tmp_path.parent / f"{tmp_path.name}.db"), progress=False)),
        "plot_sweep": sweep.plot_sweep([{"b": b, "loss": b * m, "m": m} for b in (1, 2) for m in (3, 4)], "b", "loss",
                                       hue="m"),
    }
    for name, result in drawn.items():
        assert result is not None, name
    for path in tmp_path.iterdir():
        assert path.stat().st_size > 1000, path
    return set(drawn)


def test_the_library_leaves_matplotlib_as_the_user_set_it(tmp_path):
    import matplotlib.pyplot as plt

    mine = plt.figure()                                    # the user's own figure, current (backend chosen)
    backend = matplotlib.rcParams._get("backend")
    params = dict(matplotlib.rcParams)
    try:
        drawn = _draw_every_figure(tmp_path)
        assert plt.get_fignums() == [mine.number] and plt.gcf() is mine
        assert matplotlib.rcParams._get("backend") == backend
        assert dict(matplotlib.rcParams) == params
    finally:
        plt.close(mine)
    assert drawn == set(_figure_functions())               # every figure of the package was drawn


def test_one_figure_helper_and_no_private_helper_across_modules():
    import ast

    for module in PLOTTING:
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert not [a.name for a in node.names if a.name.startswith("_")], module.__name__
            if isinstance(node, ast.Attribute) and node.attr == "use":
                assert getattr(node.value, "id", None) != "matplotlib", module.__name__
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("pyplot" in n for n in names), module.__name__
        if module.__name__ != "sheaflinalg.plotting.figure":
            assert "dpi" not in inspect.getsource(module), module.__name__     # one resolution: figure.DPI


def test_saved_figures_are_complete_files(tmp_path):
    from sheaflinalg.plotting.figure import new_figure, save_figure

    fig, ax = new_figure()
    ax.plot(np.arange(3))
    save_figure(fig, tmp_path / "a.png")
    save_figure(fig, tmp_path / "a.pdf")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "a.pdf").read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "a.png"]
    with pytest.raises(ValueError, match="does not exist"):
        save_figure(fig, tmp_path / "no" / "a.png")


def test_graph_figure(tmp_path):
    """Every node once with its operation and stalk size, a joint per hyperedge, the boundary and the output."""
    from helpers.graph_examples import every_op_network
    from sheaflinalg.plotting.graph import plot_graph

    net = every_op_network()
    ax = plot_graph(net, path=tmp_path / "g.svg")
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    for node in net.graph.nodes:
        assert sum(t.startswith(node.name + "\n" + node.op + " ") for t in labels) == 1, node.name
        assert sum(t.endswith(f"= {net.graph.sizes[node.name]}") and t.startswith(node.name) for t in labels) == 1
    assert "x (input)\n2x6x6 = 72" in labels and "yhat\nidentity(fc)" in labels
    assert labels.count("1") == sum(node.rule.has_bias for node in net.graph.nodes) == 4
    assert len([line for line in ax.lines if line.get_marker() == "o"]) == 2        # res (add) and cat (concat)
    assert (tmp_path / "g.svg").read_bytes().lstrip().startswith(b"<?xml")
    ax = plot_graph(net.graph, nodes=("res", "cat"), title="part")
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    assert {t.split()[0] for t in labels} == {"conv2", "relu1", "res", "pool", "avg", "cat"}
    assert "conv2\n(outside) 144" in labels and ax.get_title() == "part"


@pytest.mark.parametrize("kwargs, words", [({"max_nodes": 5}, r"12 nodes, more than 5 .* nodes=\('conv1', 'res'\)"),
                                           ({"nodes": ("fc", "res")}, "comes after"),
                                           ({"nodes": ("res", "ghost")}, "pair .* of node names"),
                                           ({"max_nodes": 0}, "positive integer")])
def test_graph_figure_refusals(kwargs, words):
    from helpers.graph_examples import every_op_network
    from sheaflinalg.plotting.graph import plot_graph

    with pytest.raises(ValueError, match=words):
        plot_graph(every_op_network(), **kwargs)
    with pytest.raises(TypeError, match="Network or a sheaflinalg Graph, got str"):
        plot_graph("net.npz")


def test_graph_figure_refuses_more_than_60_nodes_by_default():
    from sheaflinalg.plotting.graph import plot_graph

    nodes = [sl.Node("r0", "relu", ["x"])] + [sl.Node(f"r{i}", "relu", [f"r{i - 1}"]) for i in range(1, 61)]
    with pytest.raises(ValueError, match=r"61 nodes, more than 60 can be drawn legibly: .* nodes=\('r0', 'r59'\)"):
        plot_graph(sl.Graph((3,), nodes))
    assert len([t for t in plot_graph(sl.Graph((3,), nodes), nodes=("r10", "r20")).texts if t.get_text()]) == 12
