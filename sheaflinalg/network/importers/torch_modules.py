"""PyTorch modules and their arguments as graph-network steps; parameters read as float64.

One converter per kind of layer, shared by the module (``nn.MaxPool2d``) and
functional (``F.max_pool2d``) forms: both hand over the same arguments by name.
"""

import numbers
from dataclasses import dataclass, field

import numpy as np

from .builder import fold_batchnorm, refuse


@dataclass
class Step:
    """What one torch.fx node becomes: a node of operation ``op`` reading ``parents`` (torch.fx nodes), or,
    with ``op=None``, nothing (the value is its only parent's).  ``resolve(shape)`` returns the attributes that
    depend on shapes (``shape(fx_node)``: the per-sample shape torch computed)."""

    op: str
    parents: list
    attrs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    resolve: object = None


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


def pool_step(name, op, n_axes, kind, parent, args):
    """A max or average pooling from its torch arguments (module attributes or a function's bound arguments)."""
    if args.get("ceil_mode"):
        raise refuse(name, op, "ceil_mode=True (windows past the edge) is not supported; use ceil_mode=False")
    if kind == "maxpool":
        if args.get("return_indices"):
            raise refuse(name, op, "return_indices=True is not supported (the indices are not a tensor value)")
        return Step("maxpool", [parent], window_attrs(name, op, n_axes, args, ("kernel_size", "stride", "padding",
                                                                                 "dilation")))
    if args.get("divisor_override") is not None:
        raise refuse(name, op, "divisor_override is not supported")
    attrs = window_attrs(name, op, n_axes, args, ("kernel_size", "stride", "padding"))
    return Step("avgpool", [parent], {**attrs, "count_include_pad": bool(args["count_include_pad"])})


def adaptive_step(parent):
    """An adaptive average pooling: its output size is read off torch's own output shape."""
    return Step("adaptive_avgpool", [parent], resolve=lambda node, shape: {"output_size": shape(node)[1:]})


def reshape_step(parent):
    """Flatten, view or reshape: the per-sample shape torch computed (elided when it does not change)."""
    return Step("reshape", [parent], resolve=lambda node, shape: {"shape": shape(node)})


def leaky_step(name, op, parent, slope):
    if not isinstance(slope, numbers.Real) or isinstance(slope, bool):
        raise refuse(name, op, f"negative_slope must be a number, got {slope!r}")
    return Step("leaky_relu", [parent], {"negative_slope": float(slope)})


def _linear(torch, module, name, op, parent):
    W = torch_values(torch, module.weight, f"layer {name} ({op}) weight")
    b = (torch_values(torch, module.bias, f"layer {name} ({op}) bias") if module.bias is not None
         else np.zeros(W.shape[0]))
    return Step("linear", [parent], params={"weight": W, "bias": b})


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


def _conv(torch, module, name, op, parent):
    if module.padding_mode != "zeros":
        raise refuse(name, op, f"padding_mode={module.padding_mode!r}; only 'zeros' is supported")
    n_axes = module.weight.dim() - 2
    args = {"stride": module.stride, "padding": _conv_padding(module, name, op, n_axes),
            "dilation": module.dilation, "kernel_size": module.kernel_size}
    attrs = window_attrs(name, op, n_axes, args, ("stride", "padding", "dilation"))
    step = _linear(torch, module, name, op, parent)
    return Step("conv", [parent], {**attrs, "groups": int(module.groups)}, step.params)


def _batchnorm(torch, module, name, op, parent):
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
    return Step("batchnorm", [parent], params={"scale": scale, "shift": shift})


def _dropout(torch, module, name, op, parent):
    if module.training and module.p > 0:
        raise refuse(name, op, "the dropout is in training mode (random); call model.eval() first")
    return Step(None, [parent])


def module_steps(nn):
    """``{module class: converter(torch, module, name, op, parent) -> Step}`` for the supported layers."""
    def pool(kind, n_axes):
        return lambda torch, m, name, op, parent: pool_step(name, op, n_axes, kind, parent, vars(m))

    table = {nn.Linear: _linear, nn.Conv1d: _conv, nn.Conv2d: _conv, nn.BatchNorm1d: _batchnorm,
             nn.BatchNorm2d: _batchnorm,
             nn.MaxPool1d: pool("maxpool", 1), nn.MaxPool2d: pool("maxpool", 2),
             nn.AvgPool1d: pool("avgpool", 1), nn.AvgPool2d: pool("avgpool", 2),
             nn.AdaptiveAvgPool1d: lambda torch, m, name, op, parent: adaptive_step(parent),
             nn.AdaptiveAvgPool2d: lambda torch, m, name, op, parent: adaptive_step(parent),
             nn.Flatten: lambda torch, m, name, op, parent: reshape_step(parent),
             nn.ReLU: lambda torch, m, name, op, parent: Step("relu", [parent]),
             nn.LeakyReLU: lambda torch, m, name, op, parent: leaky_step(name, op, parent, m.negative_slope),
             nn.Identity: lambda torch, m, name, op, parent: Step(None, [parent])}
    table.update({cls: _dropout for cls in (nn.Dropout, nn.Dropout1d, nn.Dropout2d)})
    return table
