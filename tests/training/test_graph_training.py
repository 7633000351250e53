"""Training graph networks: parameter velocities, the backpropagated gradient, the joint dynamics and SGD.

Oracles: finite differences of the sheaf energy ``1/2 ||e(theta)||^2`` at a fixed state (the pattern
is read off the state, so the energy is a quadratic in theta there) for every parameter kind; torch
autograd (float64) and finite differences of the loss for the gradient; the chain (MLP) path on a
Linear/LeakyReLU(0) graph, which is the same network computed by the graph code.
"""

import numpy as np
import pytest
from hypothesis import given, settings

from helpers.graph_examples import every_op_network
from helpers.random_graphs import graph_networks, random_inputs
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf
from sheaflinalg.training.backpropagation import descent_direction
from sheaflinalg.training.velocity import GraphParameters, ParameterVelocity


def _random_state(graph, rng, M):
    return {node.name: rng.normal(size=(M, graph.sizes[node.name])) for node in graph.nodes}


def _energy(params, theta, X, values):
    return float(np.sum(GraphSheaf.energy(GraphSheaf(params.graph(theta)).residuals(X, values))))


def _check_velocity_against_energy(net, X, rng):
    graph = net.graph
    params = GraphParameters(graph)
    theta = params.flat()
    values = _random_state(graph, rng, X.shape[0])
    residuals = GraphSheaf(graph).residuals(X, values)
    velocity = ParameterVelocity(graph).flat(params, X, values, residuals.edges)
    h = 1e-3          # the energy is quadratic in theta at a fixed state: central differences are exact
    # a few entries of every parameter array (each kind, each node), all of them for small arrays
    picks = np.concatenate([rng.choice(np.arange(where.start, where.stop), size=min(4, where.stop - where.start),
                                       replace=False) for _, _, where, _ in params.slices])
    velocity = velocity[picks]
    numeric = np.empty(picks.size)
    for i, p in enumerate(picks):
        up, down = theta.copy(), theta.copy()
        up[p] += h
        down[p] -= h
        numeric[i] = -(_energy(params, up, X, values) - _energy(params, down, X, values)) / (2 * h)
    scale = max(1.0, np.abs(numeric).max())
    np.testing.assert_allclose(velocity, numeric, rtol=0, atol=1e-7 * scale)
    kinds = {graph.node(name).op for name, *_ in params.slices}
    return kinds


@settings(max_examples=10, deadline=None)
@given(case=graph_networks(max_layers=3))
def test_parameter_velocity_is_minus_the_energy_gradient(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    _check_velocity_against_energy(net, X, np.random.default_rng(seed))


def test_parameter_velocity_of_every_parameter_kind():
    net = every_op_network()             # conv with groups, dilation and padding; batch norm; linear
    X = np.random.default_rng(1).normal(size=(3, net.n_inputs))
    assert _check_velocity_against_energy(net, X, np.random.default_rng(2)) == {"conv", "batchnorm", "linear"}


def test_strided_convolution_velocity_sums_over_positions():
    rng = np.random.default_rng(3)
    conv = Node("c", "conv", ["x"], {"stride": 2, "padding": 1, "dilation": 2, "groups": 3},
                {"weight": rng.normal(size=(6, 1, 3, 2)), "bias": rng.normal(size=6)})
    net = sl.Network.from_nodes((3, 7, 6), [conv, Node("r", "relu", ["c"])])
    _check_velocity_against_energy(net, rng.normal(size=(2, net.n_inputs)), rng)


def _torch_gradient(model, X, Y):
    torch = pytest.importorskip("torch")
    model.zero_grad()
    out = model(torch.from_numpy(X))
    loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(Y.argmax(axis=1)))
    loss.backward()
    return {name: p.grad.numpy() for name, p in model.named_parameters()}


def test_sgd_gradient_equals_torch_autograd():
    pytest.importorskip("torch")
    from helpers.torch_models import mnist1d_cnn

    model = mnist1d_cnn()
    net = sl.Network.from_torch(model, input_shape=(1, 40))
    net = net.replace(output="softmax")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 1, 40))
    Y = np.eye(10)[rng.integers(0, 10, size=4)]
    params = GraphParameters(net.graph)
    direction = descent_direction(net.graph, X.reshape(4, -1), Y, "cross_entropy", params=params)
    grads = _torch_gradient(model, X, Y)
    arrays = params.arrays(-direction)
    assert len(grads) == len(params.slices)
    for name, key, _, _ in params.slices:
        np.testing.assert_allclose(arrays[name][key], grads[f"{name}.{key}"], rtol=1e-10, atol=1e-13)


def test_sgd_gradient_against_finite_differences_of_the_loss():
    net = every_op_network(seed=4)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3, net.n_inputs))
    Y = rng.normal(size=(3, net.n_outputs))
    params = GraphParameters(net.graph)
    theta = params.flat()
    direction = descent_direction(net.graph, X, Y, "mse", params=params)

    def loss(t):
        return float(np.mean((sl.Network.from_graph(params.graph(t)).forward(X) - Y) ** 2))

    h = 1e-6
    for p in rng.choice(theta.size, size=25, replace=False):
        up, down = theta.copy(), theta.copy()
        up[p] += h
        down[p] -= h
        assert -(loss(up) - loss(down)) / (2 * h) == pytest.approx(direction[p], rel=1e-5, abs=1e-8)


def _leaky_twin(mlp):
    """The MLP as a graph network: its ReLUs as LeakyReLU(0) (the same map, not a chain)."""
    nodes = [Node(n.name, "leaky_relu", n.inputs, {"negative_slope": 0.0}) if n.op == "relu" else n
             for n in mlp.graph.nodes]
    return sl.Network.from_nodes(mlp.input_shape, nodes, mlp.output)


@pytest.mark.parametrize("output", ["identity", "softmax"])
def test_graph_path_equals_the_chain_path(output):
    mlp = sl.Network.random([3, 5, 4, 2], seed=1, output=output)
    twin = _leaky_twin(mlp)
    assert twin.is_graph and not mlp.is_graph
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 3))
    Y = np.eye(2)[rng.integers(0, 2, 6)] if output == "softmax" else rng.normal(size=(6, 2))
    init = rng.normal(size=(6, 5 + 5 + 4 + 4 + 2))
    kw = dict(steps=30, epoch_steps=10, dt=0.01, init=init, progress=False, stagnation=False)
    chain, graph = sl.train(mlp, X, Y, **kw), sl.train(twin, X, Y, **kw)
    np.testing.assert_allclose(graph.network.parameters(), chain.network.parameters(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(graph.history.train_loss, chain.history.train_loss, rtol=1e-12)
    np.testing.assert_allclose(graph.history.discord, chain.history.discord, rtol=1e-10)
    np.testing.assert_allclose(graph.state, chain.state, rtol=1e-12, atol=1e-13)
    chain, graph = sl.sgd(mlp, X, Y, epochs=20, progress=False), sl.sgd(twin, X, Y, epochs=20, progress=False)
    np.testing.assert_allclose(graph.network.parameters(), chain.network.parameters(), rtol=1e-12, atol=1e-14)


def test_joint_dynamics_lower_the_loss_of_a_cnn():
    net = every_op_network(seed=6)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4, 2, 6, 6))
    Y = rng.normal(size=(4, 3))
    fit = sl.train(net, X, Y, steps=200, epoch_steps=50, dt=0.001, beta=0.01, init="forward", progress=False)
    assert fit.network.is_graph and fit.state.shape == (4, fit.layout.n_free)
    assert np.all(np.diff(fit.history.discord) < 0)        # a gradient flow of the discord in (state, theta)
    assert fit.history.train_loss[-1] < 0.8 * fit.history.train_loss[0]
    assert len(fit.history.weight_norms[0]) == 4          # conv1, bn1, conv2, fc
    fit = sl.sgd(net, X, Y, epochs=20, lr=0.002, progress=False)
    assert fit.history.train_loss[-1] < fit.history.train_loss[0]


def test_graph_training_resumes_from_a_checkpoint(tmp_path):
    net = every_op_network(seed=8)
    rng = np.random.default_rng(9)
    X, Y = rng.normal(size=(2, net.n_inputs)), rng.normal(size=(2, 3))
    kw = dict(steps=40, epoch_steps=10, dt=0.001, seed=0, progress=False)
    whole = sl.train(net, X, Y, **kw)
    path = str(tmp_path / "run.npz")
    stop = []

    def interrupt(info):
        if info.epoch == 2:
            stop.append(info.epoch)
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sl.train(net, X, Y, checkpoint=path, checkpoint_every=1, callback=interrupt, **kw)
    resumed = sl.train(net, X, Y, checkpoint=path, checkpoint_every=1, **kw)
    assert stop == [2]
    np.testing.assert_array_equal(resumed.network.parameters(), whole.network.parameters())
    np.testing.assert_array_equal(resumed.history.train_loss, whole.history.train_loss)


@pytest.mark.parametrize("call, match", [
    (lambda net, X, Y: sl.train(net, X, Y, reg={"mu": 0.1}, progress=False), "regularisation"),
    (lambda net, X, Y: sl.train(net, X, Y, loss="huber", progress=False), "mse, cross_entropy"),
    (lambda net, X, Y: sl.sgd(net, X, Y, loss="l1", progress=False), "mse, cross_entropy"),
    (lambda net, X, Y: sl.sgd(net, X, Y, reg={"mu": 0.1}, progress=False), "reg.mu"),
    (lambda net, X, Y: sl.train(net, X, Y, stagnation=True, progress=False), "stagnation='auto' or False"),
])
def test_what_graph_training_does_not_take_is_refused(call, match):
    net = every_op_network()
    with pytest.raises(sl.GraphNetworkError, match=match):
        call(net, np.zeros((2, net.n_inputs)), np.zeros((2, 3)))


def test_an_unstable_step_is_refused_naming_the_largest_stable_dt():
    net = every_op_network()
    with pytest.raises(ValueError, match=r"unstable step size.*use dt < "):
        sl.train(net, np.zeros((2, net.n_inputs)), np.zeros((2, 3)), dt=10.0, progress=False)


def test_train_command_takes_a_graph_network_file_and_data(tmp_path, capsys):
    from sheaflinalg.cli import main

    net = every_op_network(seed=10)
    net_path, data_path, out_path = tmp_path / "g.npz", tmp_path / "d.npz", tmp_path / "out.npz"
    net.save(net_path)
    rng = np.random.default_rng(11)
    np.savez(data_path, X_train=rng.normal(size=(3, 2, 6, 6)), Y_train=rng.normal(size=(3, 3)))
    for method, extra in (("sheaf", ["--dt", "0.001"]), ("sgd", ["--lr", "0.001"])):
        assert main(["train", "--network", str(net_path), "--data", str(data_path), "--method", method,
                     "--steps", "20", "--no-progress", "--save", str(out_path)] + extra) == 0
        assert f"{method}: 20 steps" in capsys.readouterr().out
        trained = sl.Network.load(out_path)
        assert trained.is_graph and not np.array_equal(trained.parameters(), net.parameters())
    assert main(["train", "--network", str(net_path), "--steps", "5", "--no-progress"]) == 2
    assert "takes 72 inputs (shape (2, 6, 6)) but task 'paraboloid' has 2" in capsys.readouterr().err
    assert main(["train", "--data", str(data_path), "--steps", "5", "--no-progress"]) == 2
    assert "--data needs --network" in capsys.readouterr().err
    np.savez(data_path, X_train=rng.normal(size=(3, 72)), Y_train=np.full((3, 3), np.nan))
    assert main(["train", "--network", str(net_path), "--data", str(data_path), "--steps", "5",
                 "--no-progress"]) == 2
    assert "entry 'Y_train'" in capsys.readouterr().err


def test_a_diverging_graph_run_stops_with_the_last_finite_parameters():
    net = every_op_network(seed=12)
    rng = np.random.default_rng(13)
    X, Y = rng.normal(size=(2, net.n_inputs)), rng.normal(size=(2, 3))
    with pytest.warns(sl.DivergenceWarning, match="diverged during epoch"):
        fit = sl.train(net, X, Y, steps=400, epoch_steps=20, dt=0.001, beta=1e4, progress=False)
    assert fit.history.diverged and np.all(np.isfinite(fit.network.parameters()))
    with pytest.warns(sl.DivergenceWarning):
        fit = sl.sgd(net, X, Y, epochs=200, lr=1e3, progress=False)
    assert fit.history.diverged and np.all(np.isfinite(fit.network.parameters()))
