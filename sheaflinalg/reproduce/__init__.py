"""Every figure and table of the paper's section 6 and appendix E, from this package's computations.

One module per topic (``convergence``, ``training``, ``spectra``, ``discord``,
``table_e1``, ``gap_depth``), each item a function writing into an
:class:`~sheaflinalg.reproduce.output.Outputs` directory; ``registry`` lists the
items with the paper's figure or table number and runs them resumably
(``sheaflinalg reproduce`` is its command line).

May import every layer below it (tasks, plotting, dynamics, training, spectral, sheaf, network,
``_common``), never ``commands``.
"""
