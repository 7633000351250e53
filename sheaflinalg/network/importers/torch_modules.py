"""The PyTorch importer's converters: a layer, function or tensor method as a graph-network step.

One converter per kind of layer, shared by the module (``nn.MaxPool2d``) and
functional (``F.max_pool2d``) forms: both hand over the same arguments by name.
A converter writes no op name: it is handed the op's rule by the importer's
table (:mod:`.torch_table`), which says what every supported name becomes.
Parameters are read as float64 (:func:`torch_values`).
"""

import inspect
import numbers
import operator
from dataclasses import dataclass, field

import numpy as np

from .builder import fold_batchnorm, refuse


@dataclass
class Step:
    """What one torch.fx node becomes: a node of the op ``rule`` (an :class:`~sheaflinalg.network.ops.OpRule`)
    reading ``parents`` (torch.fx nodes), or, with ``rule=None``, nothing (the value is its only parent's).
    ``resolve(node, shape)`` returns the attributes that depend on shapes (``shape(fx_node)``: the per-sample
    shape torch computed); ``constants(node, shape, value)`` the parameters read off constant values
    (``value(fx_node)``: the float64 array the model's run gave a value not computed from the input).
    ``then(node, shape)`` gives ``(rule, params)`` of a node after it computing the
    fx node's value from the step's (a normalisation's affine part), or None.  ``inner``: ``[(key, suffix,
    Step)]`` of nodes made first, in order (an fx node that expands into several: attention), which later
    parents read by their ``key``."""

    rule: object
    parents: list
    attrs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    resolve: object = None
    then: object = None
    constants: object = None
    inner: list = field(default_factory=list)

    def reads(self):
        """The values the step reads that it does not make itself."""
        made = [key for key, _, _ in self.inner]
        steps = [step for _, _, step in self.inner] + [self]
        return [p for step in steps for p in step.parents if not any(p is key for key in made)]


def torch_values(torch, tensor, name):
    """A parameter as a float64 ndarray: real floating dtypes on any device are converted (copied to the
    CPU); the meta device (shapes without values), complex, integer, boolean and quantized tensors are
    refused, as they hold no real numbers to convert."""
    if tensor.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape but no values. Materialise the "
                         "model first (e.g. model.to_empty(device='cpu') and load its state_dict)")
    if tensor.is_quantized or tensor.is_complex() or not tensor.is_floating_point():
        raise TypeError(f"{name} has dtype {tensor.dtype}; expected real floating-point parameters "
                        "(float16, bfloat16, float32 or float64, converted to float64)")
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    with torch.no_grad():
        return tensor.detach().to(device="cpu", dtype=torch.float64).numpy().copy()


def _axes(value, n_axes):
    """A window argument (int or sequence) as a tuple of ``n_axes`` ints, or None if it is neither."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value),) * n_axes
    if isinstance(value, (tuple, list)) and len(value) == n_axes and \
            all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        return tuple(int(v) for v in value)
    return None


def window_attrs(name, op, n_axes, args, keys):
    """``{key: tuple of n_axes ints}`` for the window arguments ``keys`` (a missing stride is the kernel's)."""
    attrs = {}
    for key in keys:
        value = args[key]
        if key == "stride" and (value is None or (isinstance(value, (tuple, list)) and not value)):
            value = args["kernel_size"]
        attrs[key] = _axes(value, n_axes)
        if attrs[key] is None:
            raise refuse(name, op, f"{key}={value!r} is not {n_axes} integer(s)")
    return attrs


def _pool_attrs(name, op, n_axes, args, keys):
    """The window attributes ``keys`` of a pooling and its ``ceil_mode`` (a bool)."""
    ceil_mode = args.get("ceil_mode", False)
    if not isinstance(ceil_mode, (bool, int)):
        raise refuse(name, op, f"ceil_mode={ceil_mode!r} is not a bool")
    return {**window_attrs(name, op, n_axes, args, keys), "ceil_mode": bool(ceil_mode)}


def maxpool_step(rule, name, op, n_axes, parent, args):
    """A max pooling from its torch arguments (module attributes or a function's bound arguments)."""
    if args.get("return_indices"):
        raise refuse(name, op, "return_indices=True is not supported (the indices are not a tensor value)")
    return Step(rule, [parent], _pool_attrs(name, op, n_axes, args, ("kernel_size", "stride", "padding", "dilation")))


def avgpool_step(rule, name, op, n_axes, parent, args):
    """An average pooling from its torch arguments (module attributes or a function's bound arguments)."""
    if args.get("divisor_override") is not None:
        raise refuse(name, op, "divisor_override is not supported (a divisor other than the window's count)")
    attrs = _pool_attrs(name, op, n_axes, args, ("kernel_size", "stride", "padding"))
    return Step(rule, [parent], {**attrs, "count_include_pad": bool(args["count_include_pad"])})


def plain_step(rule, parent):
    """An op without attributes or parameters (ReLU), or, with ``rule=None``, an elided value (Identity)."""
    return Step(rule, [parent])


def adaptive_step(rule, parent):
    """An adaptive average pooling: its output size is read off torch's own output shape."""
    return Step(rule, [parent], resolve=lambda node, shape: {"output_size": shape(node)[1:]})


def reshape_step(rule, parent):
    """Flatten, view or reshape: the per-sample shape torch computed (elided when it does not change)."""
    return Step(rule, [parent], resolve=lambda node, shape: {"shape": shape(node)})


def leaky_step(rule, name, op, parent, slope):
    if not isinstance(slope, numbers.Real) or isinstance(slope, bool):
        raise refuse(name, op, f"negative_slope must be a number, got {slope!r}")
    return Step(rule, [parent], {"negative_slope": float(slope)})


def weight_and_bias(torch, weight, bias, where, n_outputs=lambda W: W.shape[0]):
    """``{"weight", "bias"}`` as float64 arrays; a missing bias (None) is ``n_outputs(W)`` zeros."""
    W = torch_values(torch, weight, f"{where} weight")
    b = torch_values(torch, bias, f"{where} bias") if bias is not None else np.zeros(n_outputs(W))
    return {"weight": W, "bias": b}


def linear_module(rule, torch, module, name, op, parent):
    """``nn.Linear`` (or a layer with a weight and an optional bias: the convolutions' parameters)."""
    return Step(rule, [parent], params=weight_and_bias(torch, module.weight, module.bias, f"layer {name} ({op})"))


def _conv_padding(module, name, op, n_axes):
    padding = module.padding
    if padding == "valid":
        return (0,) * n_axes
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(module.dilation, module.kernel_size)]
        if any(t % 2 for t in total):
            raise refuse(name, op, f"padding='same' pads unevenly here (total padding {total}); only symmetric "
                                   "zero padding is supported")
        return tuple(t // 2 for t in total)
    return padding


def conv_module(rule, torch, module, name, op, parent):
    if module.padding_mode != "zeros":
        raise refuse(name, op, f"padding_mode={module.padding_mode!r}; only 'zeros' is supported")
    n_axes = module.weight.dim() - 2
    args = {"stride": module.stride, "padding": _conv_padding(module, name, op, n_axes),
            "dilation": module.dilation, "kernel_size": module.kernel_size}
    attrs = window_attrs(name, op, n_axes, args, ("stride", "padding", "dilation"))
    step = linear_module(rule, torch, module, name, op, parent)
    return Step(rule, [parent], {**attrs, "groups": int(module.groups)}, step.params)


def conv_transpose_step(rule, torch, name, op, parent, args, weight, bias):
    """A transposed convolution from its torch arguments (``stride``, ``padding``, ``output_padding``,
    ``dilation``, ``groups``) and its weight ``(C_in, C_out / groups, *kernel)`` and bias tensors."""
    groups = args["groups"]
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise refuse(name, op, f"groups={groups!r} is not a positive integer")
    attrs = window_attrs(name, op, weight.dim() - 2, args, ("stride", "padding", "output_padding", "dilation"))
    params = weight_and_bias(torch, weight, bias, f"{name} ({op})", lambda W: W.shape[1] * int(groups))
    return Step(rule, [parent], {**attrs, "groups": int(groups)}, params)


def conv_transpose_module(rule, torch, module, name, op, parent):
    """``nn.ConvTranspose1d/2d`` (called on its input alone: an ``output_size`` argument is refused where the
    module is called)."""
    if module.padding_mode != "zeros":
        raise refuse(name, op, f"padding_mode={module.padding_mode!r}; only 'zeros' is supported")
    return conv_transpose_step(rule, torch, name, op, parent, vars(module), module.weight,
                               module.bias)


def _conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Stand-in signature of ``F.conv_transpose1d/2d``."""


def model_parameter(name, op, value, what):
    """The tensor a ``get_attr`` fx node reads off the traced model (a parameter or buffer), or a refusal."""
    if getattr(value, "op", None) != "get_attr":
        raise refuse(name, op, f"its {what} is {value!r}, not a parameter or buffer of the model read in forward "
                               "(self.weight): only those are read as a layer's parameters")
    return operator.attrgetter(value.target)(value.graph.owning_module)


def conv_transpose_function(rule, node, name, op):
    """``F.conv_transpose1d/2d`` with a weight (and bias) that are parameters or buffers of the model."""
    import torch

    args = bind(_conv_transpose, node)
    bias = None if args["bias"] is None else model_parameter(name, op, args["bias"], "bias")
    return conv_transpose_step(rule, torch, name, op, args["input"], args,
                               model_parameter(name, op, args["weight"], "weight"), bias)


def batchnorm_module(rule, torch, module, name, op, parent):
    if module.training:
        raise refuse(name, op, "the batch norm is in training mode (it would use the batch's statistics); "
                               "call model.eval() first")
    if module.running_mean is None or module.running_var is None:
        raise refuse(name, op, "it keeps no running statistics (track_running_stats=False); an eval-mode batch "
                               "norm needs running_mean and running_var")
    mean = torch_values(torch, module.running_mean, f"layer {name} ({op}) running_mean")
    var = torch_values(torch, module.running_var, f"layer {name} ({op}) running_var")
    gamma = (torch_values(torch, module.weight, f"layer {name} ({op}) weight") if module.weight is not None
             else np.ones_like(mean))
    beta = (torch_values(torch, module.bias, f"layer {name} ({op}) bias") if module.bias is not None
            else np.zeros_like(mean))
    scale, shift = fold_batchnorm(name, op, gamma, beta, mean, var, module.eps)
    return Step(rule, [parent], params={"scale": scale, "shift": shift})


def dropout_module(rule, torch, module, name, op, parent):
    """``nn.Dropout`` in eval mode: elided (``rule`` is None)."""
    if module.training and module.p > 0:
        raise refuse(name, op, "the dropout is in training mode (random); call model.eval() first")
    return Step(rule, [parent])


def _max_pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Stand-in signature of ``F.max_pool1d/2d``."""


def _avg_pool(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    """Stand-in signature of ``F.avg_pool1d/2d``."""


def _leaky_relu(input, negative_slope=0.01, inplace=False):
    """Stand-in signature of ``F.leaky_relu``."""


def _dropout(input, p=0.5, training=True, inplace=False):
    """Stand-in signature of ``F.dropout``."""


def _cat(tensors, dim=0):
    """Stand-in signature of ``torch.cat``."""


def _add(input, other, alpha=1):
    """Stand-in signature of ``torch.add``."""


#: Stand-in signatures of the pooling functions, by the step they make.
POOL_SIGNATURES = {maxpool_step: _max_pool, avgpool_step: _avg_pool}


def bind(signature, node):
    """``{argument: value}`` of the fx ``node``'s call, bound to ``signature`` with its defaults; a refusal
    naming the node if they do not fit."""
    try:
        bound = inspect.signature(signature).bind(*node.args, **node.kwargs)
    except TypeError as exc:
        raise refuse(node.name, getattr(node.target, "__name__", node.target),
                     f"its arguments are not understood ({exc})") from None
    bound.apply_defaults()
    return bound.arguments


def leaky_function(rule, node, name, op):
    """``F.leaky_relu``."""
    return leaky_step(rule, name, op, node.args[0], bind(_leaky_relu, node)["negative_slope"])


def add_function(rule, node, name, op):
    """``x + y``, ``torch.add``, ``Tensor.add``: a plain sum."""
    args = bind(_add, node)
    if args["alpha"] != 1:
        raise refuse(name, op, f"alpha={args['alpha']!r}; only a plain sum (alpha=1) is supported")
    return Step(rule, [args["input"], args["other"]])


def cat_function(rule, node, name, op):
    """``torch.cat``: a concatenation along a per-sample axis."""
    args = bind(_cat, node)
    parents = list(args["tensors"]) if isinstance(args["tensors"], (list, tuple)) else [args["tensors"]]
    dim = args["dim"]

    def axis(node, shape):
        ndim = len(shape(parents[0])) + 1
        if not isinstance(dim, int) or not -ndim <= dim < ndim or dim % ndim == 0:
            raise refuse(name, op, f"dim={dim!r} is not a per-sample axis of these rank-{ndim} values (1..{ndim - 1}, "
                                   "or negative); the batch axis 0 would mix the samples")
        return {"axis": dim % ndim - 1}
    if dim == 0:        # refused before anything runs
        raise refuse(name, op, "dim=0 concatenates along the batch axis; only per-sample axes are supported")
    return Step(rule, parents, resolve=axis)     # of one tensor (DenseNet's first layer): elided by the builder


def dropout_function(rule, node, name, op):
    """``F.dropout`` with ``training=False`` (or ``p=0``): elided (``rule`` is None)."""
    args = bind(_dropout, node)
    if args["training"] and args["p"] > 0:
        raise refuse(name, op, "dropout with training=True is random; call model.eval() first")
    return Step(rule, [args["input"]])


def _dims(name, op, dims, ndim):
    """Tensor dimensions (ints, negative from the end) as non-negative ints of a rank-``ndim`` value."""
    dims = [dims] if isinstance(dims, int) and not isinstance(dims, bool) else list(dims)
    if not all(isinstance(d, int) and not isinstance(d, bool) and -ndim <= d < ndim for d in dims):
        raise refuse(name, op, f"dims {dims!r} are not dimensions of these rank-{ndim} values")
    return [d % ndim for d in dims]


def permute_function(rule, node, name, op):
    """``Tensor.permute``/``torch.permute``, ``Tensor.transpose``/``torch.transpose``: the batch axis stays first."""
    swap = getattr(node.target, "__name__", node.target) == "transpose"
    rest = list(node.args[1:]) + [node.kwargs[k] for k in ("dims", "dim0", "dim1") if k in node.kwargs]
    dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest

    def axes(fx_node, shape):
        ndim = len(shape(node.args[0])) + 1
        order = _dims(name, op, dims, ndim)
        if swap and len(order) == 2:
            a, b = order
            order = list(range(ndim))
            order[a], order[b] = b, a
        if sorted(order) != list(range(ndim)):
            raise refuse(name, op, f"dims {dims!r} are not a permutation of the {ndim} dimensions")
        if order[0] != 0:
            raise refuse(name, op, f"dims {dims!r} move the batch axis 0; only per-sample axes may be permuted")
        return {"axes": tuple(d - 1 for d in order[1:])}
    return Step(rule, [node.args[0]], resolve=axes)


def _mean(input, dim=None, keepdim=False, dtype=None):
    """Stand-in signature of ``torch.mean`` and ``Tensor.mean``."""


def mean_function(rule, node, name, op):
    """``Tensor.mean``/``torch.mean``, ``Tensor.sum``/``torch.sum`` over given per-sample dimensions (a reduction
    over the batch mixes samples)."""
    args = bind(_mean, node)
    if args["dim"] is None or args["dim"] == () or args["dim"] == []:
        raise refuse(name, op, "a reduction without dim reduces over the batch axis too; give the per-sample dims")

    def axes(fx_node, shape):
        ndim = len(shape(args["input"])) + 1
        dims = _dims(name, op, args["dim"], ndim)
        if 0 in dims:
            raise refuse(name, op, f"dim={args['dim']!r} reduces over the batch axis 0, mixing the samples")
        return {"axes": tuple(sorted(d - 1 for d in set(dims))), "keepdim": bool(args["keepdim"])}
    return Step(rule, [args["input"]], resolve=axes)


def pad_step(rule, name, op, parent, pad, mode="constant", value=0.0):
    """A zero padding from torch's ``pad`` (last dimension first: ``(left, right, top, bottom, ...)``)."""
    if mode != "constant" or value not in (None, 0, 0.0):
        raise refuse(name, op, f"mode={mode!r}, value={value!r}; only zero padding (mode 'constant', value 0) "
                               "is a linear map without a constant")
    pad = [pad] * 2 if isinstance(pad, int) and not isinstance(pad, bool) else list(pad)
    if len(pad) % 2 or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pad):
        raise refuse(name, op, f"pad={pad!r} is not pairs of integers >= 0 (a negative pad crops)")

    def pads(fx_node, shape):
        n = len(shape(parent)) - 1
        if len(pad) // 2 > n:
            raise refuse(name, op, f"pad={pad!r} pads the channel or batch axis; only the {n} spatial axes")
        pairs = [(0, 0)] * (n - len(pad) // 2) + [tuple(pad[i:i + 2]) for i in range(0, len(pad), 2)][::-1]
        return {"pads": tuple(p for pair in pairs for p in pair)}
    return Step(rule, [parent], resolve=pads)


def _pad(input, pad, mode="constant", value=None):
    """Stand-in signature of ``F.pad``."""


def pad_function(rule, node, name, op):
    """``F.pad`` with zeros."""
    return pad_step(rule, name, op, *bind(_pad, node).values())         # input, pad, mode, value


def pad_module(rule, torch, module, name, op, parent):
    """``nn.ZeroPad1d/2d``, ``nn.ConstantPad1d/2d`` with value 0."""
    return pad_step(rule, name, op, parent, module.padding, "constant", getattr(module, "value", 0.0))


def slice_range(name, op, shape, dim, start, stop, step=1):
    """The attributes of a slice ``start:stop:step`` (Python's clamping) of the batched dimension ``dim``."""
    axis = _dims(name, op, dim, len(shape) + 1)[0]
    if axis == 0:
        raise refuse(name, op, f"dim={dim!r} slices the batch axis 0; only per-sample axes may be sliced")
    start, stop, step = slice(start, stop, step).indices(shape[axis - 1])
    if stop <= start:
        raise refuse(name, op, f"the slice {start}:{stop}:{step} of dim {dim} is empty")
    return {"axis": axis - 1, "start": start, "stop": stop, "step": step}


def _narrow(input, dim, start, length):
    """Stand-in signature of ``torch.narrow`` and ``Tensor.narrow``."""


def narrow_function(rule, node, name, op):
    """``Tensor.narrow``/``torch.narrow``: ``length`` entries of ``dim`` from ``start``."""
    args = bind(_narrow, node)

    def attrs(fx_node, shape):
        parent = shape(args["input"])
        start = args["start"] + (parent[args["dim"] % (len(parent) + 1) - 1] if args["start"] < 0 else 0)
        return slice_range(name, op, parent, args["dim"], start, start + args["length"])
    return Step(rule, [args["input"]], resolve=attrs)


def _chunk(input, chunks, dim=0):
    """Stand-in signature of ``torch.chunk`` and ``Tensor.chunk``."""


def _split(tensor, split_size_or_sections, dim=0):
    """Stand-in signature of ``torch.split`` and ``Tensor.split``."""


def _split_signature(source):
    """The stand-in signature of a ``chunk`` or ``split`` fx node, or None for another value."""
    kind = getattr(source.target, "__name__", source.target) if getattr(source, "op", None) in (
        "call_function", "call_method") else None
    return {"chunk": _chunk, "split": _split}.get(kind) if isinstance(kind, str) else None


def _pieces(source, shape):
    """``(parent, dim, [(start, stop)])`` of a ``chunk`` or ``split`` node."""
    args = list(bind(_split_signature(source), source).values())
    parent, size, dim = args
    length = shape(parent)[dim % (len(shape(parent)) + 1) - 1]
    if _split_signature(source) is _chunk:
        size = -(-length // size)
    sizes = [min(size, length - k) for k in range(0, length, size)] if isinstance(size, int) else list(size)
    ends = [sum(sizes[:k + 1]) for k in range(len(sizes))]
    return parent, dim, list(zip([0] + ends[:-1], ends))


def split_function(rule, node, name, op):
    """``chunk`` and ``split`` (functions and methods): nothing of their own, each piece read is a slice."""
    if any(u.op != "call_function" or u.target is not operator.getitem for u in node.users):
        raise refuse(name, op, "its pieces must be read by indexing its result with a constant (a, b = x.chunk(2))")
    return Step(None, [list(bind(_split_signature(node), node).values())[0]])


def getitem_function(rule, node, name, op):
    """``pieces[i]`` of a ``chunk``/``split``, or ``x[:, a:b]``: slices of one per-sample axis."""
    source, index = node.args

    def piece(fx_node, shape):
        parent, dim, ranges = _pieces(source, shape)
        return slice_range(name, op, shape(parent), dim, *ranges[index])
    if _split_signature(source) is not None:
        return Step(rule, [list(bind(_split_signature(source), source).values())[0]], resolve=piece)
    index = index if isinstance(index, tuple) else (index,)
    if not all(isinstance(i, slice) for i in index) or index[0] != slice(None) or \
            not all(isinstance(v, (int, type(None))) and not isinstance(v, bool)
                    for i in index for v in (i.start, i.stop, i.step)) or any((i.step or 1) < 1 for i in index):
        raise refuse(name, op, f"index {index!r} is not slices with constant steps >= 1 of per-sample axes after "
                               "a full batch axis (x[:, a:b]); integer, tensor and None indices are not supported")
    axes = [k for k, i in enumerate(index) if i != slice(None)]
    if len(axes) > 1:
        raise refuse(name, op, f"index {index!r} slices {len(axes)} axes; slice one axis at a time")

    def attrs(fx_node, shape):
        axis = axes[0] if axes else 1
        i = index[axis] if axes else slice(None)
        return slice_range(name, op, shape(source), axis, i.start, i.stop, i.step or 1)
    return Step(rule, [source], resolve=attrs)


#: torch's interpolation modes the ``upsample`` op reads, by their mode there.
UPSAMPLE_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


def _upsample_mode(name, op, mode, align_corners, antialias):
    """``{mode, align_corners}`` of an upsampling from torch's arguments (refusal of other modes)."""
    if mode not in UPSAMPLE_MODES or antialias:
        raise refuse(name, op, f"mode={mode!r}, antialias={antialias!r}; only modes 'nearest', 'linear' and "
                               "'bilinear' without antialias are supported")
    return {"mode": UPSAMPLE_MODES[mode], "align_corners": bool(align_corners)}


def upsample_step(rule, name, op, parent, size=None, scale_factor=None, mode="nearest", align_corners=None,
                  recompute_scale_factor=None, antialias=False):
    """A nearest or (bi)linear upsampling by integer factors (``scale_factor``, or a ``size`` an integer
    multiple)."""
    attrs = _upsample_mode(name, op, mode, align_corners, antialias)
    if (size is None) == (scale_factor is None):
        raise refuse(name, op, "give exactly one of size and scale_factor")

    def scale(fx_node, shape):
        parent_shape, out = shape(parent), shape(fx_node)
        n = len(parent_shape) - 1
        factors = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor or 0] * n
        by_size = [o // p if o % p == 0 else 0 for o, p in zip(out[1:], parent_shape[1:])]
        if size is not None:
            factors = by_size
        if not all(float(f) == int(f) >= 1 for f in factors) or [int(f) for f in factors] != by_size:
            raise refuse(name, op, f"scale_factor={scale_factor!r}, size={size!r}: only integer factors are supported")
        return {"scale": tuple(int(f) for f in factors), **attrs}
    return Step(rule, [parent], resolve=scale)


def _interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None, antialias=False):
    """Stand-in signature of ``F.interpolate``."""


def upsample_function(rule, node, name, op):
    """``F.interpolate`` with mode ``"nearest"``, ``"linear"`` or ``"bilinear"`` and integer factors."""
    args = bind(_interpolate, node)
    return upsample_step(rule, name, op, args["input"], args["size"], args["scale_factor"], args["mode"],
                         args["align_corners"], antialias=args["antialias"])


def upsample_module(rule, torch, module, name, op, parent):
    """``nn.Upsample`` (and its subclasses ``nn.UpsamplingNearest2d``, ``nn.UpsamplingBilinear2d``)."""
    return upsample_step(rule, name, op, parent, module.size, module.scale_factor, module.mode, module.align_corners)
