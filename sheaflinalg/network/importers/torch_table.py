"""The PyTorch importer's one table: every supported framework name, the op it becomes and its converter.

Every supported ``nn.Module`` class, torch function and tensor method is an
:class:`~.builder.Entry`: the rule of the op it becomes (an object of the registry
:data:`sheaflinalg.network.ops.RULES`, so a misspelt op fails at import, or
None for a value elided into its parent: Identity, Dropout in eval mode,
``contiguous``) and its converter (:mod:`.torch_modules`), which is handed
that rule and writes no op name: ``convert(rule, torch, module, name, op,
parent)`` for a module class, ``convert(rule, fx_node, name, op)`` for a
function or tensor method, returning a ``Step``.  The output activations (Sigmoid, Tanh,
Softmax), which are graph operations inside the network and the output activation at its end, are
listed here too.  Adding a name
is one line here; the refusal of an unsupported operation lists the names read
off this table (:meth:`TorchTable.supported`).
"""

import operator

from .. import ops
from .builder import Entry, or_list
from .torch_activations import (activation_function, activation_module, clamp_function, hardsigmoid_function,
                                hardsigmoid_module, hardtanh_function, hardtanh_module, relu6_function)
from .torch_norms import (groupnorm_function, groupnorm_module, layernorm_function, layernorm_module,
                          normalize_function, rmsnorm_function)
from .torch_affine import (affine_function, expand_function, has_constant_operand, linear_function, matmul_function,
                           roll_function, stochastic_depth_function)
from .torch_products import attention_function, mul_function, softmax_function, softmax_module
from .torch_products import matmul_function as product_matmul
from .torch_modules import (POOL_SIGNATURES, adaptive_step, add_function, avgpool_step, batchnorm_module, bind,
                            cat_function, conv_module, conv_transpose_function, conv_transpose_module,
                            dropout_function, dropout_module, leaky_function, leaky_step, getitem_function,
                            linear_module, maxpool_step, mean_function, narrow_function, pad_function, pad_module,
                            permute_function, plain_step, reshape_step, split_function, upsample_function,
                            upsample_module)


def _module(step):
    """The module form of a step of the module's one input, ``step(rule, parent)``."""
    return lambda rule, torch, module, name, op, parent: step(rule, parent)


def _function(step):
    """The function (or tensor method) form of a step of the call's first argument, ``step(rule, parent)``."""
    return lambda rule, node, name, op: step(rule, node.args[0])


def _pool_module(step, n_axes):
    return lambda rule, torch, module, name, op, parent: step(rule, name, op, n_axes, parent, vars(module))


def _pool_function(step, n_axes):
    signature = POOL_SIGNATURES[step]
    return lambda rule, node, name, op: step(rule, name, op, n_axes, node.args[0], bind(signature, node))


def _or_constant(convert, constant):
    """A binary operation's converter: the entry ``constant``'s where an operand is a constant (``x + c``,
    ``x * c``: the affine map of the other operand; ``x @ W``: a linear one), else ``convert``'s (two values)."""
    def run(rule, node, name, op):
        if has_constant_operand(node):
            return constant.convert(constant.rule, node, name, op)
        return convert(rule, node, name, op)
    return run


def _or_affine(convert):
    """A sum's converter that reads a constant operand (``x + c``) as the affine map of the other operand."""
    return _or_constant(convert, Entry(ops.affine.RULE, affine_function("add")))


def _leaky_module(rule, torch, module, name, op, parent):
    return leaky_step(rule, name, op, parent, module.negative_slope)


def _modules(nn):
    """``{nn.Module class: Entry}``."""
    return {nn.Linear: Entry(ops.linear.RULE, linear_module),
            nn.Conv1d: Entry(ops.conv.RULE, conv_module), nn.Conv2d: Entry(ops.conv.RULE, conv_module),
            nn.ConvTranspose1d: Entry(ops.conv_transpose.RULE, conv_transpose_module),
            nn.ConvTranspose2d: Entry(ops.conv_transpose.RULE, conv_transpose_module),
            nn.BatchNorm1d: Entry(ops.batchnorm.RULE, batchnorm_module),
            nn.BatchNorm2d: Entry(ops.batchnorm.RULE, batchnorm_module),
            nn.MaxPool1d: Entry(ops.maxpool.RULE, _pool_module(maxpool_step, 1)),
            nn.MaxPool2d: Entry(ops.maxpool.RULE, _pool_module(maxpool_step, 2)),
            nn.AvgPool1d: Entry(ops.avgpool.RULE, _pool_module(avgpool_step, 1)),
            nn.AvgPool2d: Entry(ops.avgpool.RULE, _pool_module(avgpool_step, 2)),
            nn.AdaptiveAvgPool1d: Entry(ops.adaptive_avgpool.RULE, _module(adaptive_step)),
            nn.AdaptiveAvgPool2d: Entry(ops.adaptive_avgpool.RULE, _module(adaptive_step)),
            nn.Flatten: Entry(ops.reshape.RULE, _module(reshape_step)),
            nn.ReLU: Entry(ops.relu.RULE, _module(plain_step)),
            nn.LeakyReLU: Entry(ops.leaky_relu.RULE, _leaky_module),
            nn.Identity: Entry(None, _module(plain_step)),
            nn.Dropout: Entry(None, dropout_module), nn.Dropout1d: Entry(None, dropout_module),
            nn.Dropout2d: Entry(None, dropout_module),
            nn.ZeroPad1d: Entry(ops.pad.RULE, pad_module), nn.ZeroPad2d: Entry(ops.pad.RULE, pad_module),
            nn.ConstantPad1d: Entry(ops.pad.RULE, pad_module), nn.ConstantPad2d: Entry(ops.pad.RULE, pad_module),
            nn.Upsample: Entry(ops.upsample.RULE, upsample_module),
            nn.LayerNorm: Entry(ops.layernorm.RULE, layernorm_module),
            nn.GroupNorm: Entry(ops.groupnorm.RULE, groupnorm_module),
            nn.RMSNorm: Entry(ops.rmsnorm.RULE, layernorm_module),
            nn.ReLU6: Entry(ops.clamp.RULE, hardtanh_module), nn.Hardtanh: Entry(ops.clamp.RULE, hardtanh_module),
            nn.Hardsigmoid: Entry(ops.clamp.RULE, hardsigmoid_module),
            nn.Softmax: Entry(ops.softmax.RULE, softmax_module),
            **{cls: Entry(rule, activation_module) for cls, rule in _activations(nn).items()}}


def _activations(nn):
    """``{nn.Module class: rule}`` of the smooth elementwise activations."""
    return {nn.Sigmoid: ops.sigmoid.RULE, nn.Tanh: ops.tanh.RULE, nn.GELU: ops.gelu.RULE, nn.SiLU: ops.silu.RULE,
            nn.Softplus: ops.softplus.RULE, nn.ELU: ops.elu.RULE, nn.Mish: ops.mish.RULE,
            nn.Hardswish: ops.hardswish.RULE}


def _activation_functions(torch, F):
    """``{function: Entry}`` of the smooth elementwise activations."""
    rules = {torch.sigmoid: ops.sigmoid.RULE, F.sigmoid: ops.sigmoid.RULE, torch.tanh: ops.tanh.RULE,
             F.tanh: ops.tanh.RULE, F.gelu: ops.gelu.RULE, F.silu: ops.silu.RULE, F.softplus: ops.softplus.RULE,
             F.elu: ops.elu.RULE, F.mish: ops.mish.RULE, F.hardswish: ops.hardswish.RULE}
    return {function: Entry(rule, activation_function) for function, rule in rules.items()}


_PERMUTE = Entry(ops.permute.RULE, permute_function)
_MEAN = Entry(ops.mean.RULE, mean_function)
_SUM_OVER = Entry(ops.sum.RULE, mean_function)
_NARROW = Entry(ops.slice.RULE, narrow_function)
_SPLIT = Entry(ops.slice.RULE, split_function)
_SUM = Entry(ops.add.RULE, _or_affine(add_function))
_MINUS, _TIMES, _OVER = (Entry(ops.affine.RULE, affine_function(kind)) for kind in ("sub", "mul", "div"))
_LINEAR = Entry(ops.linear.RULE, linear_function)
_ROLL = Entry(ops.roll.RULE, roll_function)
_IDENTITY = Entry(None, _function(plain_step))
_DROPOUT = Entry(None, dropout_function)
_CLAMP = Entry(ops.clamp.RULE, clamp_function)
_MUL = Entry(ops.mul.RULE, _or_constant(mul_function, _TIMES))
_MATMUL = Entry(ops.matmul.RULE, _or_constant(product_matmul, Entry(ops.linear.RULE, matmul_function)))
_SOFTMAX = Entry(ops.softmax.RULE, softmax_function)


def _functions(torch, F):
    """``{function: Entry}`` (``operator.add``: the ``+`` torch.fx records)."""
    add, concat, relu = _SUM, Entry(ops.concat.RULE, cat_function), Entry(ops.relu.RULE, _function(plain_step))
    adaptive = Entry(ops.adaptive_avgpool.RULE, _function(adaptive_step))
    transposed = Entry(ops.conv_transpose.RULE, conv_transpose_function)
    return {operator.add: add, operator.iadd: add, torch.add: add, torch.cat: concat, torch.concat: concat,
            torch.flatten: Entry(ops.reshape.RULE, _function(reshape_step)),
            F.relu: relu, torch.relu: relu, torch.relu_: relu,
            F.leaky_relu: Entry(ops.leaky_relu.RULE, leaky_function),
            F.max_pool1d: Entry(ops.maxpool.RULE, _pool_function(maxpool_step, 1)),
            F.max_pool2d: Entry(ops.maxpool.RULE, _pool_function(maxpool_step, 2)),
            F.avg_pool1d: Entry(ops.avgpool.RULE, _pool_function(avgpool_step, 1)),
            F.avg_pool2d: Entry(ops.avgpool.RULE, _pool_function(avgpool_step, 2)),
            F.adaptive_avg_pool1d: adaptive, F.adaptive_avg_pool2d: adaptive,
            F.dropout: _DROPOUT, F.dropout1d: _DROPOUT, F.dropout2d: _DROPOUT,
            torch.permute: _PERMUTE, torch.transpose: _PERMUTE, torch.mean: _MEAN, torch.sum: _SUM_OVER,
            F.pad: Entry(ops.pad.RULE, pad_function), torch.narrow: _NARROW, torch.chunk: _SPLIT,
            torch.split: _SPLIT, operator.getitem: Entry(ops.slice.RULE, getitem_function),
            F.interpolate: Entry(ops.upsample.RULE, upsample_function), torch.clamp: _CLAMP, torch.clip: _CLAMP,
            F.relu6: Entry(ops.clamp.RULE, relu6_function), F.hardtanh: Entry(ops.clamp.RULE, hardtanh_function),
            F.hardsigmoid: Entry(ops.clamp.RULE, hardsigmoid_function),
            F.conv_transpose1d: transposed, F.conv_transpose2d: transposed,
            F.layer_norm: Entry(ops.layernorm.RULE, layernorm_function),
            F.group_norm: Entry(ops.groupnorm.RULE, groupnorm_function),
            F.rms_norm: Entry(ops.rmsnorm.RULE, rmsnorm_function), **_activation_functions(torch, F),
            F.normalize: Entry(ops.normalize.RULE, normalize_function),
            operator.sub: _MINUS, operator.isub: _MINUS, operator.mul: _MUL, operator.imul: _MUL,
            operator.truediv: _OVER, operator.itruediv: _OVER, torch.sub: _MINUS, torch.mul: _MUL,
            torch.div: _OVER, F.linear: _LINEAR, torch.matmul: _MATMUL, operator.matmul: _MATMUL,
            torch.roll: _ROLL, torch.clone: _IDENTITY, torch.bmm: _MATMUL, torch.softmax: _SOFTMAX, F.softmax: _SOFTMAX,
            F.scaled_dot_product_attention: Entry(ops.matmul.RULE, attention_function)}


def _parameter_readers(F):
    """The functions whose weight and bias arguments are the model's parameters (``get_attr`` values), not
    values of the network."""
    return {F.conv_transpose1d, F.conv_transpose2d, F.layer_norm, F.group_norm, F.rms_norm}


#: ``{module.name of a function: Entry}`` of functions of packages not imported (torchvision's, which torch.fx
#: records as calls, its modules being traced through).
NAMED = {"torchvision.ops.stochastic_depth.stochastic_depth": Entry(None, stochastic_depth_function)}


_RESHAPE = Entry(ops.reshape.RULE, _function(reshape_step))
_RELU = Entry(ops.relu.RULE, _function(plain_step))
#: ``{tensor method name: Entry}``.
METHODS = {"view": _RESHAPE, "reshape": _RESHAPE, "flatten": _RESHAPE, "contiguous": _IDENTITY,
           "relu": _RELU, "relu_": _RELU, "add": _SUM,
           "permute": _PERMUTE, "transpose": _PERMUTE, "mean": _MEAN, "narrow": _NARROW, "chunk": _SPLIT,
           "split": _SPLIT, "sum": _SUM_OVER, "sigmoid": Entry(ops.sigmoid.RULE, activation_function),
           "tanh": Entry(ops.tanh.RULE, activation_function), "add_": _SUM, "sub": _MINUS, "sub_": _MINUS,
           "mul": _MUL, "mul_": _MUL, "div": _OVER, "div_": _OVER,
           "matmul": _MATMUL, "roll": _ROLL, "expand": Entry(ops.constant.RULE, expand_function),
           "expand_as": Entry(ops.constant.RULE, expand_function), "clone": _IDENTITY, "type_as": _IDENTITY,
           "clamp": _CLAMP, "clip": _CLAMP, "bmm": _MATMUL, "softmax": _SOFTMAX}



def _finals(torch, nn, F):
    """``{module class, function or method name: output activation}`` of the supported final activations."""
    return {nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Softmax: "softmax", torch.sigmoid: "sigmoid",
            torch.tanh: "tanh", F.sigmoid: "sigmoid", F.tanh: "tanh", F.softmax: "softmax",
            torch.softmax: "softmax", "sigmoid": "sigmoid", "tanh": "tanh", "softmax": "softmax"}


def _names(keys):
    """Distinct display names of table keys (classes and functions by ``__name__``), in table order."""
    return list(dict.fromkeys(key if isinstance(key, str) else key.__name__ for key in keys))


class TorchTable:
    """The table for the installed torch: ``modules`` and ``functions`` (``{class or function: Entry}``),
    ``methods`` (``{name: Entry}``), ``parameter_readers`` (functions reading parameters as arguments) and
    ``finals`` (``{class, function or method name: output activation}``).

    Examples
    --------
    >>> import torch
    >>> table = TorchTable(torch)
    >>> table.modules[torch.nn.Conv2d].rule
    <op rule 'conv'>
    >>> table.methods["contiguous"].rule is None
    True
    """

    def __init__(self, torch):
        import torch.nn.functional as F
        self.modules = _modules(torch.nn)
        self.functions = _functions(torch, F)
        self.methods = METHODS
        self.parameter_readers = _parameter_readers(F)
        self.named = NAMED
        self.finals = _finals(torch, torch.nn, F)

    def entries(self):
        """Every :class:`Entry` of the table."""
        return [*self.modules.values(), *self.functions.values(), *self.methods.values(), *self.named.values()]

    def supported(self):
        """What the importer supports, as the refusal of an unsupported operation lists it."""
        finals = [name for name in _names(self.finals) if name[0].isupper()]
        functions = _names(self.functions) + [key.rsplit(".", 1)[1] for key in self.named]
        return (f"layers {', '.join(_names(self.modules))}; functions {', '.join(functions)}; "
                f"tensor methods {', '.join(_names(self.methods))}; and a final {or_list(finals)} "
                "(BatchNorm and Dropout in eval mode; docs/guide.md, Importing CNNs and ResNets)")
