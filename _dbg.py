import numpy as np, sheaflinalg as sl, os
from sheaflinalg.plotting.exact import *
net = sl.Network.random([2, 8, 1], seed=2)
ex = sl.heat(net, [[0.5, -1.0]], method="exact", seed=3, pins={"yhat": 1.0})
print(ex, ex.events)
plot_exact_phase_plane(ex, neurons=(0,1), path="/tmp/pp.png")
plot_exact_convergence(ex, path="/tmp/cv.png")
