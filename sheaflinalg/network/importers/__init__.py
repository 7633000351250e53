"""Importers of trained models: scikit-learn MLPs, PyTorch (``nn.Sequential`` and torch.fx-traceable
modules) and ONNX files.  Each imports its package lazily, inside the call."""

from .onnx_graph import graph_from_onnx
from .sklearn_mlp import network_arrays_from_sklearn
from .torch_fx import graph_from_torch

__all__ = ["graph_from_onnx", "graph_from_torch", "network_arrays_from_sklearn"]
