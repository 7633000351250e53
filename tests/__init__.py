"""The test suite: one folder per layer of the package, shared code in ``tests/helpers``.

A new test file goes to the folder of the layer it tests (``kernels``, ``network`` with the importers,
``sheaf``, ``discord``, ``dynamics``, ``spectral``, ``training``, ``sweep``, ``reproduce``,
``plotting``, ``cli`` for the commands, ``common`` for ``_common``'s rules and the refusals, ``tasks``,
``benchmarks``, ``package`` for the package as a whole).  Naive twins, strategies and example
networks shared by several files live in ``helpers`` and are imported as ``helpers.<module>``; a test
that wants a random graph network draws it from ``helpers.random_graphs.graph_networks`` (or builds a
fixed one with ``random_graph(seed, ...)``).
"""
