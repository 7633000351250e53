"""The smooth-network benchmark's models (benchmarks/smooth_models.py): both import exactly from torch, train the
same parameters as torch does, and take the smooth equilibrium path at the default nudging."""

import importlib.util
import sys

import numpy as np
import pytest

from helpers.paths import ROOT
import sheaflinalg as sl
from sheaflinalg.training.equilibrium.smooth import takes_smooth_path
from sheaflinalg.training.velocity import GraphParameters

torch = pytest.importorskip("torch")

sys.path.insert(0, str(ROOT / "benchmarks"))
spec = importlib.util.spec_from_file_location("smooth_models", ROOT / "benchmarks" / "smooth_models.py")
models = importlib.util.module_from_spec(spec)
spec.loader.exec_module(models)


@pytest.mark.parametrize("arch", ["vit", "effnet"])
def test_the_models_import_exactly_with_torchs_parameters_and_settle_on_the_smooth_path(arch):
    model = models.build(arch, 3)
    net = sl.Network.from_torch(model, input_shape=models.SHAPES[arch]).replace(output="softmax")
    X = np.random.default_rng(0).normal(size=(20, 40))
    with torch.no_grad():
        P = torch.softmax(model(torch.from_numpy(X).reshape(-1, *models.SHAPES[arch])), dim=1).numpy()
    np.testing.assert_allclose(net.forward(X), P, rtol=0, atol=1e-13)
    extra = GraphParameters(net.graph).size - sum(p.numel() for p in model.parameters())
    assert extra == {"vit": 1, "effnet": 0}[arch]        # the ViT's positional embedding: an affine map with a scale
    assert takes_smooth_path(net.graph, 1e-6)
    # the seed alone decides the weights
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), models.build(arch, 3).parameters()))
