"""``sl.Node`` converts its parameters through the validation layer (``as_float64_param``) and its window
attributes through ``as_int_tuple``: complex weights are refused instead of losing their imaginary part,
strings and ragged weights and a fractional stride get messages naming the node and the parameter.

These pass once ``network/graph/nodes.py`` calls the two functions (its ``_read_only`` and ``_ints``)."""

import numpy as np
import pytest

import sheaflinalg as sl


def _linear(weight):
    return sl.Node("fc", "linear", ["x"], params={"weight": weight, "bias": np.zeros(2)})


def test_complex_weights_are_refused_not_truncated():
    with pytest.raises(TypeError, match=r"node 'fc': parameter 'weight' must be real, got complex dtype complex128"):
        _linear(np.ones((2, 3)) * (1 + 1j))


def test_string_and_ragged_weights_are_refused_naming_the_parameter():
    with pytest.raises(TypeError, match=r"node 'fc': parameter 'weight' must be numeric, got dtype <U1"):
        _linear([["a", "b", "c"], ["d", "e", "f"]])
    with pytest.raises(ValueError, match=r"node 'fc': parameter 'weight' is ragged"):
        _linear([[1.0, 2.0, 3.0], [1.0, 2.0]])


def test_a_fractional_stride_is_refused_naming_the_node():
    conv = sl.Node("conv", "conv", ["x"], {"stride": 1.5, "padding": 0, "dilation": 1, "groups": 1},
                   {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)})
    with pytest.raises(ValueError, match=r"node 'conv' \(conv\): stride must be 1 integer\(s\) >= 1, got 1.5"):
        sl.Graph((1, 8), [conv])
