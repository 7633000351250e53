"""A small vision transformer for MNIST-1D, trained by backpropagation in PyTorch and imported as a graph network.

The 40 samples of a signal are cut into 8 patches of 5 (``Conv1d 1->32, kernel = stride = 5``), the 8
tokens of 32 features get a learned positional embedding, then two pre-LN blocks
(``x + proj(attention(LN(x)))``, two heads of 16 features written with
``F.scaled_dot_product_attention``; ``x + fc2(GELU(fc1(LN(x))))`` with 64 hidden features), a final
LayerNorm, the mean over the tokens and a linear head to the ten logits (the network's output is the
identity).  Trained with Adam on the cross-entropy in float64 (:mod:`.backprop`: seeded, on one torch
thread, torch's state restored, the network kept for a rerun).  Imported, the LayerNorms, the GELUs, the
softmax and the two products of attention are smooth nodes: the sheaf at a state is their tangent.
"""

from . import backprop
from .backprop import Protocol, predictions

WIDTH, HEADS, PATCH, DEPTH, HIDDEN = 32, 2, 5, 2, 64


def build(torch, nn, length=40, classes=10):
    """The untrained float64 ViT (weights from torch's current random state); it returns logits."""
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.q, self.k, self.v, self.proj = (nn.Linear(WIDTH, WIDTH) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(WIDTH, HIDDEN), nn.Linear(HIDDEN, WIDTH)

        def forward(self, x):
            n, t, d = x.shape
            h = self.ln1(x)
            q, k, v = (f(h).view(n, t, HEADS, d // HEADS).transpose(1, 2) for f in (self.q, self.k, self.v))
            x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv1d(1, WIDTH, PATCH, stride=PATCH)
            self.pos = nn.Parameter(0.02 * torch.randn(1, length // PATCH, WIDTH))
            self.blocks = nn.Sequential(*(Block() for _ in range(DEPTH)))
            self.norm, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, classes)

        def forward(self, x):
            x = self.blocks(self.embed(x).transpose(1, 2) + self.pos)
            return self.head(self.norm(x).mean(dim=1))

    return ViT().to(torch.float64)


def stages(graph):
    """``{stage: [node, ...]}``: the imported ViT's nodes by sub-layer, in order.

    A stage starts at its first module: ``embedding`` (the patches and positions), ``block i attention``
    at ``blocks.i.ln1`` (through the residual sum after ``proj``), ``block i MLP`` at ``blocks.i.ln2``
    (through the residual sum after ``fc2``), ``head`` at the final ``norm``.

    Examples
    --------
    >>> import torch, sheaflinalg as sl
    >>> net = sl.Network.from_torch(build(torch, torch.nn).eval(), input_shape=(1, 40))
    >>> {k: len(v) for k, v in stages(net.graph).items()}        # doctest: +NORMALIZE_WHITESPACE
    {'embedding': 3, 'block 0 attention': 18, 'block 0 MLP': 5, 'block 1 attention': 18, 'block 1 MLP': 5,
     'head': 3}
    """
    starts = {f"blocks.{i}.ln{j}": f"block {i} {part}" for i in range(DEPTH) for j, part in ((1, "attention"),
                                                                                          (2, "MLP"))}
    starts["norm"] = "head"
    out, current = {}, "embedding"
    for node in graph.nodes:
        current = starts.get(node.name, current)
        out.setdefault(current, []).append(node.name)
    return out


def trained(path, data, protocol, data_key, progress=True):
    """The ViT kept at ``path`` or trained anew: ``(network, record)`` of :func:`.backprop.trained`."""
    return backprop.trained(path, data, build, protocol, data_key, "the ViT", progress)


__all__ = ["HEADS", "Protocol", "build", "predictions", "stages", "trained"]
