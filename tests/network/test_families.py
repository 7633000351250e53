"""Every network family (tests/helpers/families.py: ViT, a causal decoder, U-Net, MobileNet-V3, EfficientNet,
ConvNeXt, DenseNet, ShuffleNet), tiny and float64, imported from PyTorch and from its ONNX export.

At the forward state: ``delta_Omega`` is square and unit lower triangular in the node order; its response to
an input perturbation is torch's Jacobian-vector product; ``sl.verify`` passes; ``sl.spectrum`` is dense
``eigh`` of the assembled Laplacian; the pinned discord is zero at the network's own output and positive away
from it; the heat equation from a random start settles on the forward pass at a step the library accepts
(forward Euler; where it needs too many steps for the suite, SLOW_HEAT, it lowers the discord), and by the
implicit scheme (``method="implicit"``) in a few steps for every family.
The ONNX export imports and its harmonic extension is torch's forward pass.
"""

import re

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")

from helpers.families import FAMILIES, family  # noqa: E402
from helpers.tangents import tangent_response, torch_jvp  # noqa: E402
from helpers.torch_models import export_onnx, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

NAMES = sorted(FAMILIES)
#: Families whose forward Euler needs more steps than the suite affords at the step the library accepts (ViT and
#: GPT: the products of attention's scores bound it at the random start, ~1e5 steps; EfficientNet and
#: MobileNet: 16-30 s each): Euler is checked to lower the discord there; every family converges by the
#: implicit scheme (test_the_implicit_heat_converges_to_the_forward_pass_from_a_random_start).
SLOW_HEAT = {"vit": 200, "gpt": 200, "efficientnet": 200, "mobilenet": 200}


def _imported(name):
    model, shape = family(name)
    return model, sl.Network.from_torch(model, input_shape=shape), shape


def _inputs(shape, n, seed=1):
    return np.random.default_rng(seed).normal(size=(n,) + shape)


@pytest.mark.parametrize("name", NAMES)
def test_the_forward_state_is_exact_and_delta_omega_unit_lower_triangular(name):
    model, net, shape = _imported(name)
    X = _inputs(shape, 2)
    np.testing.assert_allclose(sl.harmonic_extension(net, X.reshape(2, -1)).output, reference(model, X),
                               rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).status == "PASSED"
    D = sp.csr_matrix(sl.assemble(net, X[0]).delta_free)
    assert D.shape[0] == D.shape[1] > 300
    np.testing.assert_array_equal(D.diagonal(), 1.0)
    upper = sp.triu(D, k=1)
    assert upper.nnz == 0 or not upper.data.any()              # nothing above the diagonal
    assert sp.tril(D, k=-1).nnz > D.shape[0] // 2              # the restriction maps, below it


@pytest.mark.parametrize("name", NAMES)
def test_the_tangent_sheaf_responds_to_an_input_perturbation_as_torchs_jvp(name):
    model, net, shape = _imported(name)
    x, dx = _inputs(shape, 2, seed=3)
    system = sl.assemble(net, x)
    dw = tangent_response(system, dx)
    np.testing.assert_allclose(dw[system.layout.free("yhat")], torch_jvp(model, x, dx, shape), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_the_spectrum_is_dense_eigh_of_the_assembled_laplacian(name):
    _, net, shape = _imported(name)
    X = _inputs(shape, 1)
    D = sl.assemble(net, X, reduced=True).delta_free.toarray()
    w = np.linalg.eigvalsh(D.T @ D)
    # the top of the spectrum is multiple or clustered in some families (ShuffleNet's lambda_max has several
    # copies), where a Krylov method finds one copy: the largest is compared alone, the rest densely
    arpack = sl.spectrum(net, X, k=3, method="arpack", vectors=False, progress=False)
    np.testing.assert_allclose(arpack.smallest[0], w[:3], rtol=1e-9)
    np.testing.assert_allclose(arpack.largest[0, 0], w[-1], rtol=1e-9)
    dense = sl.spectrum(net, X, method="dense", full=True, vectors=False, progress=False).eigenvalues[0]
    interior = np.linspace(0, len(w) - 1, 7).astype(int)
    np.testing.assert_allclose(dense[interior], w[interior], rtol=1e-9, atol=1e-12 * w[-1])


@pytest.mark.parametrize("name", NAMES)
def test_the_pinned_discord_is_zero_at_the_own_output_and_positive_away(name):
    _, net, shape = _imported(name)
    X = _inputs(shape, 2, seed=4)
    Y = net.forward(X)
    at_own = sl.discord.pinned(net, X, Y)
    assert np.abs(at_own.total).max() < 1e-20
    away = sl.discord.pinned(net, X, Y + 0.3)
    assert np.all(away.total > 1e-6)


def _largest_dt(net, X, seed):
    """The largest step the library accepts, read off its refusal of a huge one (the bound at the start where
    a node's bound depends on the state, with adaptive=False, or the bound over every state)."""
    with pytest.raises(ValueError, match="unstable for explicit Euler") as refused:
        sl.heat(net, X, dt=1e6, max_steps=1, seed=seed, adaptive=False, progress=False)
    return float(re.search(r"largest stable dt (?:is )?([0-9.e+-]+)", str(refused.value)).group(1))


@pytest.mark.parametrize("name", NAMES)
def test_the_heat_flow_settles_on_the_forward_pass_from_a_random_start(name):
    _, net, shape = _imported(name)
    X = _inputs(shape, 1, seed=2).reshape(1, -1)
    dt = 0.9 * _largest_dt(net, X, seed=3)
    forward = sl.harmonic_extension(net, X).free
    if name in SLOW_HEAT:
        # the forward pass is the flow's equilibrium, and the flow lowers the discord from a random start
        still = sl.heat(net, X, dt=dt, init="forward", max_steps=10, tol=1e-12, progress=False)
        assert still.converged and still.steps <= 2
        start = sl.heat(net, X, dt=dt, max_steps=0, seed=3, progress=False).discord
        res = sl.heat(net, X, dt=dt, max_steps=SLOW_HEAT[name], tol=0.0, seed=3, progress=False)
        assert res.discord < 0.5 * start
        return
    res = sl.heat(net, X, dt=dt, max_steps=12_000, tol=1e-10, seed=3, progress=False)
    assert res.converged
    np.testing.assert_allclose(res.output, net.forward(X), atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_the_implicit_heat_converges_to_the_forward_pass_from_a_random_start(name):
    _, net, shape = _imported(name)
    X = _inputs(shape, 2, seed=2).reshape(2, -1)
    res = sl.heat(net, X, method="implicit", tol=1e-10, seed=3, progress=False)
    assert res.converged and res.steps <= 20
    assert np.all(np.diff(res.energies, axis=0) <= 1e-13 * res.energies[:-1])        # the energy never rises
    np.testing.assert_allclose(res.state, sl.harmonic_extension(net, X).free[:, :res.layout.n_free], atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_the_onnx_export_imports_and_its_extension_is_torchs_forward_pass(tmp_path, name):
    pytest.importorskip("onnx")
    model, shape = family(name)
    net = sl.Network.from_onnx(export_onnx(model, shape, tmp_path / f"{name}.onnx", 17))
    X = _inputs(shape, 3)
    expected = reference(model, X)
    ours = sl.harmonic_extension(net, X.reshape(3, -1)).output
    assert np.abs(ours - expected).max() <= 1e-12 * np.abs(expected).max()
    assert sl.verify(net, X).passed
