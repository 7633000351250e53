"""The sheaf of a graph network without matrices: ``delta_Omega`` applied, transposed and substituted node by
node (``coboundary``), the op rules' maps gathered per graph (``node_maps``), residuals and forces at a
moving state (``residuals``), the step-size bound valid for every pattern (``bound``), and the pattern
iteration and Filippov sliding of equilibria around any frozen solve (``switching``).
"""
