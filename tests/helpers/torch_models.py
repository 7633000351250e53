"""PyTorch models for the importer tests: hypothesis-drawn random CNNs (1-D and 2-D; convolutions with
stride, padding, dilation and groups; max and average pools; batch norms; residual additions and
concatenations at drawn places; module and functional forms) and the fixed MNIST-1D CNN and small ResNet."""

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn

CONV = {1: nn.Conv1d, 2: nn.Conv2d}
BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}
MAXPOOL = {1: nn.MaxPool1d, 2: nn.MaxPool2d}
AVGPOOL = {1: nn.AvgPool1d, 2: nn.AvgPool2d}
FMAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d}
FAVGPOOL = {1: F.avg_pool1d, 2: F.avg_pool2d}
ADAPTIVE = {1: nn.AdaptiveAvgPool1d, 2: nn.AdaptiveAvgPool2d}


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def randomize_batch_norms(model, seed):
    """Running statistics and affine parameters away from the identity (fresh ones fold to ~1 and 0)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) * 2 - 1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model


@st.composite
def _conv_block(draw, channels, size, axes):
    k = draw(st.integers(1, 3))
    d = draw(st.integers(1, 2))
    p = draw(st.integers(0, 2))
    s = draw(st.integers(1, 2))
    if _out(size, k, s, p, d) < 1:
        k, d, s, p = 1, 1, 1, 0
    groups = draw(st.sampled_from([g for g in (1, 2, 3) if channels % g == 0]))
    out = groups * draw(st.integers(1, 3))
    act = draw(st.sampled_from(["relu", "F.relu", "leaky", "none"]))
    return {"kind": "conv", "k": k, "d": d, "p": p, "s": s, "groups": groups, "out": out,
            "bias": draw(st.booleans()), "bn": draw(st.booleans()), "act": act}, out, _out(size, k, s, p, d)


@st.composite
def _pool_block(draw, channels, size, axes):
    k = draw(st.integers(1, min(3, size)))
    s = draw(st.integers(1, 2))
    p = draw(st.integers(0, k // 2))
    kind = draw(st.sampled_from(["max", "avg"]))
    d = draw(st.integers(1, 2)) if kind == "max" else 1
    if _out(size, k, s, p, d) < 1:
        d = 1
    block = {"kind": kind, "k": k, "s": s, "p": p, "d": d, "functional": draw(st.booleans()),
             "count_include_pad": draw(st.booleans())}
    return block, channels, _out(size, k, s, p, d)


@st.composite
def _residual_block(draw, channels, size, axes):
    k = draw(st.sampled_from([1, 3]))
    return {"kind": "residual", "k": k, "bn": draw(st.booleans()), "functional_add": draw(st.booleans())}, \
        channels, size


@st.composite
def _concat_block(draw, channels, size, axes):
    out = draw(st.integers(1, 3))
    return {"kind": "concat", "out": out, "negative_dim": draw(st.booleans())}, channels + 2 * out, size


@st.composite
def architectures(draw, max_blocks=4):
    """``(spec, input_shape)`` of a random CNN: blocks, then a pooled or flattened head and an output."""
    axes = draw(st.sampled_from([1, 2]))
    channels = draw(st.integers(1, 3))
    size = draw(st.integers(5, 10 if axes == 1 else 7))
    input_shape = (channels,) + (size,) * axes
    blocks = []
    for _ in range(draw(st.integers(1, max_blocks))):
        make = draw(st.sampled_from([_conv_block, _conv_block, _pool_block, _residual_block, _concat_block]))
        block, channels, size = draw(make(channels, size, axes))
        blocks.append(block)
    head = {"pool": draw(st.sampled_from([None, 1, 2])) if size >= 2 else draw(st.sampled_from([None, 1])),
            "flatten": draw(st.sampled_from(["module", "torch", "view"])), "hidden": draw(st.integers(0, 5)),
            "output": draw(st.sampled_from(["identity", "sigmoid", "tanh", "softmax"])),
            "n_out": draw(st.integers(2, 4))}
    features = channels * (head["pool"] or size) ** axes
    return {"axes": axes, "blocks": blocks, "head": head, "features": features}, input_shape


class RandomCNN(nn.Module):
    """The model of an :func:`architectures` spec (its forward reads only the static spec: fx traces it)."""

    def __init__(self, spec, input_shape):
        super().__init__()
        self.spec, axes, channels = spec, spec["axes"], input_shape[0]
        self.layers = nn.ModuleList()
        for block in spec["blocks"]:
            self.layers.append(self._block(block, axes, channels))
            channels = {"conv": block.get("out"), "concat": channels + 2 * block.get("out", 0)}.get(block["kind"],
                                                                                                channels)
        head = spec["head"]
        self.pool = ADAPTIVE[axes](head["pool"]) if head["pool"] else nn.Identity()
        self.flatten = nn.Flatten()
        width = head["hidden"] or head["n_out"]
        self.fc1 = nn.Linear(spec["features"], width)
        self.fc2 = nn.Linear(width, head["n_out"]) if head["hidden"] else None
        self.dropout = nn.Dropout(0.3)
        self.final = {"identity": nn.Identity(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(),
                      "softmax": nn.Softmax(dim=-1)}[head["output"]]

    @staticmethod
    def _block(block, axes, channels):
        kind = block["kind"]
        if kind == "conv":      # a LeakyReLU slope exact in float32, as ONNX attributes are
            conv = CONV[axes](channels, block["out"], block["k"], block["s"], block["p"], block["d"], block["groups"],
                              bias=block["bias"])
            act = {"relu": nn.ReLU(), "leaky": nn.LeakyReLU(0.125), "F.relu": nn.Identity(), "none": nn.Identity()}
            return nn.Sequential(conv, BN[axes](block["out"]) if block["bn"] else nn.Identity(), act[block["act"]])
        if kind == "max":
            return MAXPOOL[axes](block["k"], block["s"], block["p"], block["d"])
        if kind == "avg":
            return AVGPOOL[axes](block["k"], block["s"], block["p"], count_include_pad=block["count_include_pad"])
        if kind == "residual":
            conv = CONV[axes](channels, channels, block["k"], padding=block["k"] // 2)
            return nn.Sequential(conv, BN[axes](channels) if block["bn"] else nn.Identity())
        return nn.ModuleList([CONV[axes](channels, block["out"], 1), CONV[axes](channels, block["out"], 3, padding=1)])

    def _run_block(self, block, layer, x):
        kind, axes = block["kind"], self.spec["axes"]
        if kind in ("max", "avg") and block["functional"]:
            if kind == "max":
                return FMAXPOOL[axes](x, block["k"], block["s"], block["p"], block["d"])
            return FAVGPOOL[axes](x, block["k"], block["s"], block["p"], count_include_pad=block["count_include_pad"])
        if kind == "residual":
            y = layer(x)
            return F.relu(torch.add(x, y) if block["functional_add"] else x + y)
        if kind == "concat":
            dim = -(axes + 1) if block["negative_dim"] else 1
            return torch.cat([x, layer[0](x), torch.relu(layer[1](x))], dim=dim)
        y = layer(x)
        return F.relu(y) if block.get("act") == "F.relu" else y

    def forward(self, x):
        for block, layer in zip(self.spec["blocks"], self.layers):
            x = self._run_block(block, layer, x)
        x = self.pool(x)
        how = self.spec["head"]["flatten"]
        x = self.flatten(x) if how == "module" else torch.flatten(x, 1) if how == "torch" else x.view(x.size(0), -1)
        x = self.fc1(x)
        if self.fc2 is not None:
            x = self.fc2(self.dropout(F.relu(x)))
        return self.final(x)


def build(spec, input_shape, seed=0):
    """The float64 eval-mode model of a spec, with its batch norms' statistics drawn."""
    torch.manual_seed(seed)
    return randomize_batch_norms(RandomCNN(spec, input_shape), seed).double().eval()


def mnist1d_cnn():
    """The MNIST-1D CNN of the issue: conv 25x5 stride 2, 25x3/2, 25x3/2, padding 1, linear 125 -> 10."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv1d(1, 25, 5, stride=2, padding=1), nn.ReLU(),
                         nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(125, 10)).double().eval()


class BasicBlock(nn.Module):
    """A ResNet basic block (torchvision's layout: in-place ReLU, ``out += shortcut``)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return self.relu(out)


class SmallResNet(nn.Module):
    """A CIFAR-style ResNet with two basic blocks (the second downsamples through a 1x1 shortcut)."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.layer1 = nn.Sequential(BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.pool(self.layer1(x))
        return self.fc(x.view(x.size(0), -1))


def small_resnet():
    torch.manual_seed(0)
    return randomize_batch_norms(SmallResNet(), 0).double().eval()


def reference(model, X):
    """The model's own float64 forward pass on a numpy batch."""
    with torch.no_grad():
        return model(torch.from_numpy(X)).numpy().reshape(X.shape[0], -1)



class AfterConv(nn.Module):
    """``step(conv(x))`` with a 1x1 ``Conv1d`` of ``channels``: a model whose one operation under test is ``step``."""

    def __init__(self, step, channels):
        super().__init__()
        self.step, self.conv = step, nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        return self.step(self.conv(x))


def assert_round_trip(net, X, path):
    """The graph file at ``path`` keeps every node's attributes and the forward pass bit for bit."""
    import sheaflinalg as sl

    net.save(str(path))
    back = sl.Network.load(str(path))
    assert [n.attrs for n in back.graph.nodes] == [n.attrs for n in net.graph.nodes]
    assert back.forward(X).tobytes() == net.forward(X).tobytes()


def check_against_torch(net, model, shape, X=None):
    """``net``'s forward pass equals the float64 eval-mode ``model``'s on ``X`` (default: a random batch of 5 of
    per-sample ``shape``) and ``sl.verify`` passes; returns ``X``."""
    import numpy as np

    import sheaflinalg as sl

    X = np.random.default_rng(1).normal(size=(5,) + tuple(shape)) if X is None else X
    np.testing.assert_allclose(net.forward(X), reference(model.double().eval(), X), rtol=1e-12, atol=1e-12)
    assert sl.verify(net, X).passed
    return X


def export_onnx(model, shape, path, opset=None):
    """Export the float64 eval-mode ``model`` (per-sample input ``shape``) to ``path`` with torch.onnx's legacy
    exporter, a symbolic batch axis; returns ``path`` as a string."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the legacy exporter is deprecated
        torch.onnx.export(model.double().eval(), (torch.zeros((2,) + tuple(shape), dtype=torch.float64),), str(path),
                          dynamo=False, opset_version=opset, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    return str(path)
