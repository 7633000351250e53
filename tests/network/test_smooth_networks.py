"""Networks with smooth nodes (their sheaf at a state is the tangent there) against torch and the definitions.

For small MLPs and CNNs with every smooth elementwise activation, imported from PyTorch in float64:
the harmonic extension is torch's forward pass; the assembled ``delta_Omega`` at the forward state is square
and unit lower triangular; its response to an input perturbation is torch's Jacobian-vector product;
``verify`` passes; the pinned discord is zero at the network's own output and positive away from it; and
the heat equation (the gradient flow of the energy) converges to the forward pass from a random start.
The slope bounds the Euler step relies on are checked on a fine grid.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from helpers.tangents import tangent_response, torch_jvp  # noqa: E402
import sheaflinalg as sl  # noqa: E402
from sheaflinalg.network.ops import RULES  # noqa: E402
from sheaflinalg.sheaf.verification.verify import unit_lower_triangular_certificate  # noqa: E402

ACTIVATIONS = {"sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(), "gelu": nn.GELU(), "gelu-tanh": nn.GELU("tanh"),
               "silu": nn.SiLU(), "softplus": nn.Softplus(beta=2.0, threshold=3.0), "elu": nn.ELU(alpha=0.7),
               "mish": nn.Mish(), "hardswish": nn.Hardswish()}
GRID = np.linspace(-30.0, 30.0, 600_001)


@pytest.mark.parametrize("op, attrs", [("sigmoid", {}), ("tanh", {}), ("gelu", {"approximate": "none"}),
                                       ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}),
                                       ("hardswish", {}), ("softplus", {"beta": 2.0, "threshold": 20.0}),
                                       ("elu", {"alpha": 0.5}), ("elu", {"alpha": -3.0})])
def test_slope_bounds_hold_on_a_fine_grid_and_are_nearly_tight(op, attrs):
    rule = RULES[op]
    node = sl.Node("v", op, ["x"], attrs)
    slopes = np.abs(rule.derivative(node, GRID))
    assert slopes.max() <= rule.slope_bound(node)
    assert slopes.max() >= 0.98 * rule.slope_bound(node)


POINTWISE = [("sigmoid", {}), ("tanh", {}), ("gelu", {"approximate": "none"}), ("gelu", {"approximate": "tanh"}),
             ("silu", {}), ("mish", {}), ("hardswish", {}), ("softplus", {"beta": 2.0, "threshold": 3.0}),
             ("elu", {"alpha": 0.7})]


@pytest.mark.parametrize("op, attrs", POINTWISE)
def test_value_and_derivative_in_one_go_are_the_separate_ones_and_torchs(op, attrs):
    """``both`` (a forward pass's value and tangent together) is ``value`` and ``derivative`` bit for bit, and
    those are torch's activation and its autograd derivative (exact zeros, ties of the pieces, far tails)."""
    rule, node = RULES[op], sl.Node("v", op, ["x"], attrs)
    z = np.concatenate([np.linspace(-12.0, 12.0, 241), [0.0, -0.0, 3.0, -3.0, 1e-300, 40.0, -40.0]])
    value, slopes = rule.both(node, z)
    assert np.array_equal(value, rule.value(node, z)) and np.array_equal(slopes, rule.derivative(node, z))
    t = torch.tensor(z, requires_grad=True)
    out = ACTIVATIONS[op if attrs.get("approximate") != "tanh" else "gelu-tanh"](t)
    out.sum().backward()
    assert np.allclose(value, out.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert np.allclose(slopes, t.grad.numpy(), rtol=1e-12, atol=1e-14)


def _mlp(act):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 6), act, nn.Linear(6, 5), act, nn.Linear(5, 2)).double().eval()


class _CNN(nn.Module):
    def __init__(self, act):
        super().__init__()
        torch.manual_seed(1)
        self.conv, self.bn, self.act = nn.Conv1d(1, 3, 3, padding=1), nn.BatchNorm1d(3), act
        self.pool, self.fc = nn.MaxPool1d(2), nn.Linear(12, 2)

    def forward(self, x):
        h = self.act(self.bn(self.conv(x)))
        return self.fc(torch.flatten(self.pool(h) + self.act(self.pool(h)), 1))


def _model(kind, act):
    if kind == "mlp":
        return _mlp(act), (3,)
    model = _CNN(act).double().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model, (1, 8)


def _torch(model, X, shape):
    with torch.no_grad():
        return model(torch.from_numpy(X.reshape((-1,) + shape))).numpy()


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_a_smooth_network_is_exact_and_its_tangent_is_torchs_jacobian(kind, name):
    model, shape = _model(kind, ACTIVATIONS[name])
    net = sl.Network.from_torch(model, input_shape=shape)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, int(np.prod(shape))))
    h = sl.harmonic_extension(net, X)
    np.testing.assert_allclose(h.output, _torch(model, X, shape), rtol=1e-12, atol=1e-13)
    assert sl.verify(net, X).status == "PASSED"
    dx = rng.normal(size=X.shape)
    for s in range(X.shape[0]):
        system = sl.assemble(net, X[s])
        assert unit_lower_triangular_certificate(system.delta_free) == (True, "")
        dw = tangent_response(system, dx[s])
        np.testing.assert_allclose(dw[system.layout.free("yhat")], torch_jvp(model, X[s], dx[s], shape), rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.parametrize("name", ["gelu", "silu", "tanh", "hardswish"])
def test_the_pinned_discord_is_zero_at_the_own_output_and_positive_away(name):
    # an MLP: the CNN's max-pool selections make the pinned state slide between pieces (the paper's theory)
    model, shape = _model("mlp", ACTIVATIONS[name])
    net = sl.Network.from_torch(model, input_shape=shape)
    X = np.random.default_rng(1).normal(size=(4, 3))
    Y = net.forward(X)
    at_own = sl.discord.pinned(net, X, Y)
    assert at_own.settled.all() and np.abs(at_own.total).max() < 1e-20
    away = sl.discord.pinned(net, X, Y + 0.3)
    assert away.settled.all() and np.all(away.total > 1e-4)
    np.testing.assert_allclose(away.state[:, away.layout.free(net.graph.output_node)], Y + 0.3)


# Euler's flow on one activation (its 10^4 steps take seconds), the implicit scheme's on the others (8 steps)
@pytest.mark.parametrize("name, method", [("gelu", "implicit"), ("sigmoid", "euler"), ("softplus", "implicit")])
def test_the_heat_flow_converges_to_the_forward_pass_from_a_random_start(name, method):
    model, shape = _model("cnn", ACTIVATIONS[name])
    net = sl.Network.from_torch(model, input_shape=shape)
    X = np.random.default_rng(2).normal(size=(2, 8))
    result = sl.heat(net, X, init="random", seed=3, progress=False, method=method)
    assert result.converged
    np.testing.assert_allclose(result.output, _torch(model, X, shape), rtol=1e-8, atol=1e-8)
