"""Feedforward computational graphs: nodes, shapes, the forward pass with its activation pattern."""

from .graph import Graph
from .nodes import INPUT, OPS, Node

__all__ = ["Graph", "Node", "OPS", "INPUT"]
