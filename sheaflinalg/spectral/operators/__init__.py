"""The Laplacian ``L[Omega, Omega]`` and its inverse as operators, no matrix: a chain's one sample by block
substitutions in the compiled kernels (``chain``), a graph network's group of samples node by node
(``graph``), and the patterns, operator groups and dense Laplacians of graph networks (``graph_systems``).
"""
