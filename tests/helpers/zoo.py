"""The model zoo: torchvision's classification models and a small GPT-2, built with random weights at small inputs.

torchvision's wheels on PyPI are built against a CUDA torch; beside a CPU torch their compiled operators
(``torchvision::nms``, ...) do not load, and ``import torchvision`` fails where its meta registrations name
them.  The model definitions are pure Python: :func:`torchvision` imports the package normally and only
where that fails for this reason imports it again with an empty module in place of
``torchvision._meta_registrations`` (the registrations of operators that do not exist; the detection ops
then refuse to run, which no classification model calls).  Nothing else of the user's state changes.

torchvision and transformers are test extras (setup.cfg ``zoo``); :func:`require` skips a test where one is
not installed.  Used by ``tests/network/test_model_zoo.py`` and ``benchmarks/model_zoo.py``.
"""

import importlib
import sys
import types

#: Per-sample input of every model unless :data:`INPUTS` says otherwise: the smallest square image the
#: five stride-2 stages of most classifiers take down to 1x1.
DEFAULT_INPUT = (3, 32, 32)
#: ``{name: (input shape, constructor keywords)}`` of the models that need more (or a size set at construction).
INPUTS = {"alexnet": ((3, 63, 63), {}),              # 11x11/4 convolution and three 3x3/2 pools
          "inception_v3": ((3, 75, 75), {"aux_logits": False, "init_weights": True}),
          "googlenet": ((3, 32, 32), {"aux_logits": False, "init_weights": True}),
          "maxvit_t": ((3, 224, 224), {"input_size": (224, 224)}),   # every stage's grid a multiple of 7
          "vit_b_16": ((3, 32, 32), {"image_size": 32}), "vit_l_16": ((3, 32, 32), {"image_size": 32}),
          "vit_b_32": ((3, 32, 32), {"image_size": 32}), "vit_l_32": ((3, 32, 32), {"image_size": 32}),
          "vit_h_14": ((3, 28, 28), {"image_size": 28})}
#: GPT-2's size in the zoo: 2 layers, a small width, a short sequence of token embeddings.
GPT2 = {"n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 16, "vocab_size": 50, "bos_token_id": None,
        "eos_token_id": None}
GPT2_INPUT = (8, 32)          # (sequence, n_embd)
_CODES = ("torchvision::", "torchvision.")


def torchvision():
    """The ``torchvision`` module, its compiled operators loaded if they load and left out if they do not.

    Raises ImportError where torchvision is not installed.

    Examples
    --------
    >>> tv = torchvision()                          # doctest: +SKIP
    >>> "resnet18" in tv.models.list_models(module=tv.models)   # doctest: +SKIP
    True
    """
    try:
        return importlib.import_module("torchvision")
    except RuntimeError as exc:               # "operator torchvision::nms does not exist"
        if "torchvision::" not in str(exc):
            raise
    for name in [name for name in sys.modules if name == "torchvision" or name.startswith(_CODES[1])]:
        del sys.modules[name]                 # the half-imported package, imported again below
    placeholder = types.ModuleType("torchvision._meta_registrations",
                                   "Empty: the compiled operators it registers did not load (tests/helpers/zoo.py)")
    sys.modules[placeholder.__name__] = placeholder
    return importlib.import_module("torchvision")


def transformers():
    """The ``transformers`` module; torchvision, which it imports where installed, first (:func:`torchvision`)."""
    try:
        torchvision()
    except ImportError:
        pass
    return importlib.import_module("transformers")


def require(package):
    """``package`` (``"torchvision"`` or ``"transformers"``) imported, or the calling test skipped."""
    import pytest

    try:
        return torchvision() if package == "torchvision" else transformers()
    except ImportError as exc:
        pytest.skip(f"{package} is not installed ({exc}); pip install -e '.[zoo]' (scripts/setup.sh)",
                    allow_module_level=True)


def classifiers():
    """Names of every torchvision classification model (``torchvision.models.list_models``), sorted."""
    models = torchvision().models
    return sorted(models.list_models(module=models))


def parameter_count(name):
    """The number of parameters of the torchvision model ``name``, read off its weights' metadata (nothing built).

    Examples
    --------
    >>> parameter_count("resnet18")                 # doctest: +SKIP
    11689512
    """
    models = torchvision().models
    return models.get_model_weights(name).DEFAULT.meta["num_params"]


def build(name, seed=0, **keywords):
    """``(model, input shape)``: the torchvision classifier ``name`` with seeded random weights, float32, eval mode.

    ``keywords`` go to torchvision's builder over the zoo's own (:data:`INPUTS`): ``image_size=224`` builds a
    ViT at its native size (the input shape returned is then the zoo's small one; pass the native one).

    Batch norms get random running statistics and affine parameters (fresh ones are close to the identity),
    and weight matrices initialised to zeros (ViT's classification head) seeded random entries, so that they
    are seen by a comparison.
    """
    import torch

    from helpers.torch_models import randomize_batch_norms

    shape, small = INPUTS.get(name, (DEFAULT_INPUT, {}))
    keywords = {**small, **keywords}
    with torch.random.fork_rng(devices=[]):        # the caller's random state is left as it was
        torch.manual_seed(seed)
        model = torchvision().models.get_model(name, weights=None, **keywords)
    return _randomize_zero_weights(randomize_batch_norms(model, seed), seed).eval(), shape


def _randomize_zero_weights(model, seed):
    """Weights of two or more axes that are all zeros (a head initialised to zeros) drawn N(0, 0.05^2)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() >= 2 and not weight.any():
                weight.copy_(0.05 * torch.randn(weight.shape, generator=generator))
    return model


def gpt2(seed=0):
    """``(model, input shape)``: GPT-2 from ``transformers.GPT2Config`` (:data:`GPT2`, random weights), taking
    ``(batch, sequence, n_embd)`` token embeddings and returning the logits, float32, eval mode."""
    import torch

    hf = transformers()

    class GPT2Embedded(torch.nn.Module):
        """The logits of GPT-2's LM head on ``inputs_embeds=x``: the token lookup is an index, not a function
        of a real input, so the network starts after it."""

        def __init__(self, config):
            super().__init__()
            self.lm = hf.GPT2LMHeadModel(config)

        def forward(self, x):
            return self.lm(inputs_embeds=x, use_cache=False).logits

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT2Embedded(hf.GPT2Config(**GPT2)).eval(), GPT2_INPUT
