"""Network.from_onnx on values whose batch axis the exporter moved (issue 32): nn.MultiheadAttention (sequence-first,
the batch merged with the heads), torchvision's ViT and Swin against torch's float64 forward; graphs written with
onnx.helper against the operators' definitions; ops that would mix the samples refused naming the node."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from torch import nn  # noqa: E402

from helpers import zoo  # noqa: E402
from helpers.torch_models import export_onnx, reference  # noqa: E402
import sheaflinalg as sl  # noqa: E402


class _Attention(nn.Module):
    """A residual self-attention of width 4, two heads, on ``(N, 3, 4)`` tokens."""

    def __init__(self, need_weights):
        super().__init__()
        self.attn, self.need_weights = nn.MultiheadAttention(4, 2, batch_first=True), need_weights

    def forward(self, x):
        return x + self.attn(x, x, x, need_weights=self.need_weights)[0]


class _SequenceFirst(nn.Module):
    """Tokens moved sequence-first (the samples in axis 1), then a LayerNorm, a concatenation, a split and a mean
    over the tokens, moved back."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        t = self.norm(x.transpose(0, 1))                               # (3, N, 4)
        head, tail = torch.split(torch.cat([t, 2 * t], dim=2), [3, 5], dim=2)
        return torch.cat([head.mean(dim=0, keepdim=True), tail[:, :, :3]], dim=0).transpose(0, 1)


def _tiny_vit(tv):
    return tv.models.VisionTransformer(image_size=8, patch_size=4, num_layers=1, num_heads=2, hidden_dim=4,
                                       mlp_dim=8, num_classes=3)


def _tiny_swin(tv):
    return tv.models.SwinTransformer(patch_size=[2, 2], embed_dim=4, depths=[2], num_heads=[2], window_size=[2, 2],
                                     num_classes=3)


def _tiny_swin_v2(tv):
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformerBlockV2
    return tv.models.SwinTransformer(patch_size=[2, 2], embed_dim=4, depths=[2], num_heads=[2], window_size=[2, 2],
                                     num_classes=3, block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2)


def _imports_exactly(model, shape, tmp_path, rtol=1e-11, atol=0.0):
    torch.manual_seed(0)
    model = model.double().eval()
    net = sl.Network.from_onnx(export_onnx(model, shape, tmp_path / "m.onnx", opset=17))
    for n in (1, 3):                # the layouts hold at every batch size, not only the exported one
        X = np.random.default_rng(n).normal(size=(n,) + shape)
        expected = reference(model, X)
        np.testing.assert_allclose(net.forward(X), expected, rtol=rtol, atol=max(atol, rtol * np.abs(expected).max()))
    return net


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_exported_sequence_first_matches_torch(tmp_path, need_weights):
    torch.manual_seed(0)
    net = _imports_exactly(_Attention(need_weights), (3, 4), tmp_path)
    assert {"permute", "matmul", "softmax"} <= {node.op for node in net.graph.nodes}


def test_sequence_first_concat_split_mean_and_layer_norm_match_torch(tmp_path):
    torch.manual_seed(0)
    net = _imports_exactly(_SequenceFirst(), (3, 4), tmp_path)
    assert {"layernorm", "concat", "slice", "mean"} <= {node.op for node in net.graph.nodes}


#: Swin V2's file itself differs from torch's forward by about 3e-9 of the output: ONNX stores LayerNormalization's
#: epsilon as a float32 attribute (1e-5 becomes 9.99999974738e-06), and Swin V2's post-norm normalises attention
#: outputs of about 2e-3, whose variance is close to epsilon (onnx's reference evaluator runs the file as far from
#: torch; the import follows the file).
@pytest.mark.parametrize("make, rtol", [(_tiny_vit, 1e-11), (_tiny_swin, 1e-11), (_tiny_swin_v2, 1e-8)],
                         ids=["vit", "swin", "swin_v2"])
def test_torchvision_vit_and_swin_match_torch(tmp_path, make, rtol):
    tv = zoo.require("torchvision")
    torch.manual_seed(0)
    _imports_exactly(make(tv), (3, 8, 8), tmp_path, rtol)


def _save(tmp_path, nodes, out_shape, inits=()):
    """Input ``x`` of shape (N, 2, 3) through ``nodes`` to ``y`` of shape ``out_shape`` (N first), saved."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["N", *out_shape])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@settings(max_examples=15, deadline=None)
@given(st.permutations(range(3)), st.integers(0, 2), st.integers(0, 2))
def test_any_transpose_then_softmax_and_reshape_keep_each_sample_apart(tmp_path_factory, perm, axis, merge):
    """x (N, 2, 3) transposed by any ``perm`` (the samples anywhere), a softmax over an axis not holding them
    (refused, naming the node, over the one holding them), merged with a neighbour by a Reshape where the
    samples stay whole, transposed back: against numpy's definitions."""
    held = perm.index(0)
    shape = [(2, 1, 2, 3)[p + 1] if p else 4 for p in perm]       # the ONNX shape at a batch of 4
    merged = merge < 2 and held <= merge + 1                       # 0 below copies the batch's extent: same index
    target = shape[:merge] + [-1] + shape[merge + 2:] if merged else shape
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=list(perm)),
             helper.make_node("Softmax", ["t"], ["s"], axis=axis, name="sm"),
             helper.make_node("Reshape", ["s", "target"], ["r"]), helper.make_node("Reshape", ["r", "back"], ["b"]),
             helper.make_node("Transpose", ["b"], ["y"], perm=[int(a) for a in np.argsort(perm)])]
    back = [-1 if n == 4 else n for n in shape]                    # -1: the rest (the batch)
    target = [0 if n == 4 else n for n in target]                  # 0: the input's extent (the batch's)
    path = _save(tmp_path_factory.mktemp("m"), nodes, (2, 3), [("target", np.array(target)), ("back", np.array(back))])
    if axis == held:
        with pytest.raises(sl.UnsupportedModelError, match=r"'sm' \(Softmax\).*(holds the samples|is the batch)"):
            sl.Network.from_onnx(path)
        return
    net = sl.Network.from_onnx(path)
    X = np.random.default_rng(3).normal(size=(4, 2, 3))
    np.testing.assert_allclose(net.forward(X), _softmax(X.transpose(perm), axis).transpose(np.argsort(perm))
                               .reshape(4, -1), rtol=1e-12, atol=1e-14)


def test_moved_samples_through_add_softmax_gather_and_views_match_the_definitions(tmp_path):
    c = np.random.default_rng(0).normal(size=(2, 1, 3))          # broadcast along the moved batch axis
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),             # (2, N, 3)
             helper.make_node("Add", ["t", "c"], ["a"]), helper.make_node("Softmax", ["a"], ["s"], axis=-1),
             helper.make_node("Unsqueeze", ["s", "zero"], ["u"]),                          # (1, 2, N, 3)
             helper.make_node("Squeeze", ["u", "zero"], ["q"]),
             helper.make_node("Gather", ["q", "one"], ["y"], axis=0)]                      # (N, 3)
    net = sl.Network.from_onnx(_save(tmp_path, nodes, (3,), [("c", c), ("zero", np.array([0])),
                                                              ("one", np.array(1))]))
    X = np.random.default_rng(1).normal(size=(4, 2, 3))
    z = X + c[:, 0][None]
    expected = (np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))[:, 1]
    np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_moved_samples_through_concat_slice_split_reductions_and_norms_match_the_definitions(tmp_path, keepdims):
    """x (N, 2, 3) moved to (2, N, 3): concatenated, sliced, split, normalised and reduced along axes not holding
    the samples, against numpy's definitions at several batch sizes."""
    w, b = np.array([0.5, 2.0, -1.0, 1.5]), np.array([0.1, 0.0, -0.2, 0.3])
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),                 # (2, N, 3)
             helper.make_node("Concat", ["t", "t"], ["c"], axis=2),                        # (2, N, 6)
             helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"]),            # (2, N, 4): 1..5
             helper.make_node("LayerNormalization", ["s", "w", "b"], ["n"], axis=-1),
             helper.make_node("Split", ["n"], ["p", "q"], axis=0),                         # (1, N, 4) twice
             helper.make_node("Add", ["p", "q"], ["a"]),
             helper.make_node("ReduceMean", ["a"], ["m"], axes=[2], keepdims=keepdims),    # (1, N) or (1, N, 1)
             helper.make_node("Transpose", ["m"], ["y"], perm=[1, 0] + [2] * keepdims)]
    inits = [("starts", np.array([1])), ("ends", np.array([5])), ("axes", np.array([2])), ("w", w), ("b", b)]
    net = sl.Network.from_onnx(_save(tmp_path, nodes, (1,) * (1 + keepdims), inits))
    for n in (1, 4):
        X = np.random.default_rng(n).normal(size=(n, 2, 3))
        s = np.concatenate([X, X], axis=2)[:, :, 1:5]
        z = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + np.float32(1e-5)) * w + b
        expected = (z[:, 0] + z[:, 1]).mean(-1)
        np.testing.assert_allclose(net.forward(X).reshape(-1), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("nodes, out_shape, match", [
    ([helper.make_node("Softmax", ["t"], ["y0"], axis=1, name="sm"),
      helper.make_node("Transpose", ["y0"], ["y"], perm=[1, 0, 2])], (2, 3), r"'sm' \(Softmax\).*holds the samples"),
    ([helper.make_node("Transpose", ["t"], ["k"], perm=[0, 2, 1]),
      helper.make_node("MatMul", ["t", "k"], ["y"], name="mm")], (2, 2), r"'mm' \(MatMul\).*in different axes"),
    ([helper.make_node("Flatten", ["t"], ["y"], axis=2, name="fl")], (2, 3), r"'fl' \(Flatten\).*axis 1"),
    ([helper.make_node("LayerNormalization", ["t", "w"], ["y0"], axis=1, name="ln"),
      helper.make_node("Transpose", ["y0"], ["y"], perm=[1, 0, 2])], (2, 3), r"'ln' \(LayerNormalization\).*axis 1"),
    ([helper.make_node("Concat", ["t", "t"], ["y0"], axis=1, name="cat"),
      helper.make_node("Transpose", ["y0"], ["y"], perm=[1, 0, 2])], (2, 3), r"'cat' \(Concat\).*holds the samples"),
    ([helper.make_node("Reshape", ["t", "flat"], ["y"], name="r")], (2, 3), r"'r' \(Reshape\).*does not keep"),
], ids=["softmax-over-batch", "matmul-over-batch", "other-op", "norm-over-batch", "concat-over-batch",
        "reshape-mixing"])
def test_ops_mixing_moved_samples_are_refused_naming_the_node(tmp_path, nodes, out_shape, match):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]), *nodes]      # (2, N, 3)
    path = _save(tmp_path, nodes, out_shape, [("w", np.ones(3)), ("flat", np.array([-1, 2, 3]))])
    with pytest.raises(sl.UnsupportedModelError, match=match):
        sl.Network.from_onnx(path)


class _Normalize(nn.Module):
    def forward(self, x):
        return 2 * nn.functional.normalize(x, dim=-1)


def test_f_normalize_pattern_is_one_normalize_node_and_a_files_own_lp_normalization_is_refused(tmp_path):
    net = _imports_exactly(_Normalize(), (2, 3), tmp_path)
    assert [node.op for node in net.graph.nodes][0] == "normalize"
    np.testing.assert_allclose(net.forward(np.zeros((1, 6))), np.zeros((1, 6)))     # the norm clamped at eps
    path = _save(tmp_path, [helper.make_node("LpNormalization", ["x"], ["y"], axis=-1, p=2, name="lp")], (2, 3))
    with pytest.raises(sl.UnsupportedModelError, match=r"'lp' \(LpNormalization\).*F.normalize's pattern"):
        sl.Network.from_onnx(path)


@pytest.mark.parametrize("equation, out_shape", [("nij,nkj->nik", (2, 2)), ("nij,nik->njk", (3, 3)),
                                                 ("nij,nkj->nki", (2, 2)), ("inj,knj->nik", (2, 2)),
                                                 ("n i j, n k j -> k n i", (2, 2))])
def test_einsum_as_a_batched_product_matches_numpys(tmp_path, equation, out_shape):
    """Operands ``x`` and ``2x`` (N, 2, 3); an operand written ``inj`` is ``x`` transposed to (2, N, 3) (the
    samples moved); an output not starting with ``n`` is transposed back to the batch first."""
    eq = equation.replace(" ", "")
    a, b = eq.split("->")[0].split(",")
    moved = a.index("n") != 0
    out = eq.split("->")[1]
    back = out.index("n") != 0
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]), helper.make_node("Mul", ["x", "two"], ["u"]),
             helper.make_node("Transpose", ["u"], ["v"], perm=[1, 0, 2]),
             helper.make_node("Einsum", ["t", "v"] if moved else ["x", "u"], ["e"], equation=equation),
             helper.make_node("Transpose", ["e"], ["y"], perm=[out.index("n")] + [k for k in range(3)
                                                                                  if k != out.index("n")])
             if back else helper.make_node("Identity", ["e"], ["y"])]
    net = sl.Network.from_onnx(_save(tmp_path, nodes, out_shape, [("two", np.array(2.0))]))
    X = np.random.default_rng(2).normal(size=(4, 2, 3))
    operands = [X.transpose(1, 0, 2), 2 * X.transpose(1, 0, 2)] if moved else [X, 2 * X]
    expected = np.einsum(eq, *operands)
    if back:
        expected = np.moveaxis(expected, out.index("n"), 0)
    np.testing.assert_allclose(net.forward(X), expected.reshape(4, -1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation", ["nij,nij->n", "nii,nij->nij", "nij,njk", "...ij,...jk->...ik"])
def test_einsum_other_than_a_batched_product_is_refused_naming_the_node(tmp_path, equation):
    nodes = [helper.make_node("Einsum", ["x", "x"], ["y"], equation=equation, name="es")]
    with pytest.raises(sl.UnsupportedModelError, match=r"'es' \(Einsum\).*only a batched matrix product"):
        sl.Network.from_onnx(_save(tmp_path, nodes, (2, 2)))


def test_torchvision_maxvit_matches_torch(tmp_path):
    tv = zoo.require("torchvision")
    torch.manual_seed(0)
    model = tv.models.MaxVit(input_size=(8, 8), stem_channels=4, partition_size=2, block_channels=[4], block_layers=[1],
                             head_dim=2, stochastic_depth_prob=0.0, num_classes=3)
    net = _imports_exactly(model, (3, 8, 8), tmp_path, atol=1e-12)   # logits of 1e-5, inner values of order 1
    assert "matmul" in {node.op for node in net.graph.nodes}
