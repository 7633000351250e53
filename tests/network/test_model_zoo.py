"""The model zoo (tests/helpers/zoo.py): a small member of every torchvision family that imports today, with
random weights and batch-norm statistics at its smallest input, against its own float64 forward pass.

The harmonic extension of the imported network (``sl.harmonic_extension(net, X).output``) must equal torch's
forward pass to 1e-9 relative on a batch of two.  A model that newly imports is one more line of :data:`ZOO`;
``benchmarks/model_zoo.py`` runs all of them and says which do not import yet and why.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import zoo  # noqa: E402
from helpers.torch_models import export_onnx, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402

zoo.require("torchvision")

RTOL = 1e-9
slow = pytest.mark.slow
#: One line per model: the smallest member of every family that imports exactly (``slow``: over ~3 s here).
ZOO = [pytest.param("alexnet", marks=slow),
       pytest.param("vgg11", marks=slow),
       pytest.param("vgg11_bn", marks=slow),
       "resnet18",
       pytest.param("resnext50_32x4d", marks=slow),
       pytest.param("wide_resnet50_2", marks=slow),
       pytest.param("inception_v3", marks=slow),
       "regnet_x_400mf",
       "regnet_y_400mf",           # squeeze-and-excitation: mul of a value and its sigmoid gate
       pytest.param("mobilenet_v3_small", marks=slow),     # squeeze-and-excitation, a hard-sigmoid gate (clamp)
       pytest.param("efficientnet_b0", marks=slow),    # SiLU, squeeze-and-excitation, stochastic depth elided
       "mnasnet0_5",
       "densenet121",
       "shufflenet_v2_x0_5",
       "squeezenet1_1",
       pytest.param("googlenet", marks=slow),
       "mobilenet_v2",
       pytest.param("convnext_tiny", marks=slow),
       pytest.param("vit_b_16", marks=slow),    # through torch.export: nn.MultiheadAttention, the class token, GELU
       pytest.param("swin_v2_t", marks=slow)]   # through torch.export: cosine attention (normalize), cpb_mlp folded


#: The members whose ONNX export (torch.onnx, opset 17) imports in a few seconds; SqueezeNet 1.1 is the case of
#: ``benchmarks/model_zoo.py --onnx``'s test (tests/benchmarks), which checks it the same way; every family's
#: smallest member is that benchmark's (docs/model-zoo.md), too slow for the suite.
ZOO_ONNX = [pytest.param("resnet18", marks=slow), pytest.param("densenet121", marks=slow)]


def relative_error(ours, expected):
    """``max |ours - expected| / max |expected|``."""
    return float(np.abs(ours - expected).max() / np.abs(expected).max())


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_extension_is_its_forward_pass(name):
    model, shape = zoo.build(name)
    model = model.double()
    net = sl.Network.from_torch(model, input_shape=shape)
    X = np.random.default_rng(1).standard_normal((2,) + shape)
    expected = reference(model, X)
    assert relative_error(sl.harmonic_extension(net, X).output, expected) <= RTOL


@pytest.mark.parametrize("name", ZOO_ONNX)
def test_zoo_model_onnx_export_extension_is_its_forward_pass(tmp_path, name):
    pytest.importorskip("onnx")
    model, shape = zoo.build(name)
    model = model.double()
    net = sl.Network.from_onnx(export_onnx(model, shape, tmp_path / f"{name}.onnx", 17))
    X = np.random.default_rng(1).standard_normal((2,) + shape)
    assert relative_error(sl.harmonic_extension(net, X).output, reference(model, X)) <= RTOL


def test_zoo_lists_every_classifier_and_builds_seeded():
    names = zoo.classifiers()
    assert len(names) >= 75 and {"resnet18", "vit_b_16", "inception_v3", "convnext_tiny"} <= set(names)
    assert zoo.parameter_count("resnet18") == sum(p.numel() for p in zoo.build("resnet18")[0].parameters())
    state = torch.random.get_rng_state()
    a, b = zoo.build("squeezenet1_1")[0], zoo.build("squeezenet1_1")[0]
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    X = torch.randn(2, *zoo.DEFAULT_INPUT, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():       # batch norms randomised: another seed, another output
        assert not torch.allclose(a(X), zoo.build("squeezenet1_1", seed=1)[0](X))


@pytest.mark.parametrize("name", ["vit_b_16", "alexnet"])
def test_zoo_inputs_are_ones_the_model_runs_on(name):
    model, shape = zoo.build(name)
    with torch.no_grad():
        assert model(torch.zeros((1,) + shape)).shape == (1, 1000)


def test_zoo_small_vit_imports_through_export_and_is_its_forward_pass():
    torch.manual_seed(0)
    model = zoo.torchvision().models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                        hidden_dim=32, mlp_dim=64).double().eval()
    with torch.no_grad():
        model.heads.head.weight.normal_()           # initialised to zeros
    net = sl.Network.from_torch(model, input_shape=(3, 32, 32))
    X = np.random.default_rng(1).standard_normal((3, 3, 32, 32))
    assert relative_error(sl.harmonic_extension(net, X).output, reference(model, X)) <= 1e-12


def test_zoo_gpt2_imports_through_export_and_is_its_forward_pass():
    zoo.require("transformers")
    model, shape = zoo.gpt2()
    with torch.no_grad():
        assert model(torch.zeros((2,) + shape)).shape == (2, shape[0], zoo.GPT2["vocab_size"])
    assert len(model.lm.transformer.h) == 2
    model = model.double()
    # torch.fx cannot trace transformers' GPT-2 (control flow on the inputs); "auto" reads it through torch.export
    with pytest.raises(sl.UnsupportedModelError, match="torch.fx cannot trace"):
        sl.Network.from_torch(model, input_shape=shape, method="fx")
    net = sl.Network.from_torch(model, input_shape=shape)
    X = np.random.default_rng(1).standard_normal((3,) + shape)
    assert relative_error(sl.harmonic_extension(net, X).output, reference(model, X)) <= 1e-12
    softmax = [node for node in net.graph.nodes if node.op == "softmax"]
    assert len(softmax) == 2 and all(node.attrs["causal"] for node in softmax)
