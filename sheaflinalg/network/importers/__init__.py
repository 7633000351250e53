"""Importers of trained models: scikit-learn MLPs, PyTorch (``nn.Sequential``, torch.fx-traceable
modules and, through ``torch.export``, others) and ONNX files.  Each imports its package lazily, inside the call."""

from .onnx_graph import graph_from_onnx
from .sklearn_mlp import network_arrays_from_sklearn
from .torch_export import graph_from_export, graph_from_torch_by
from .torch_fx import graph_from_torch

__all__ = ["graph_from_export", "graph_from_onnx", "graph_from_torch", "graph_from_torch_by",
           "network_arrays_from_sklearn"]
