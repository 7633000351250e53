"""The tangent sheaf's response to an input perturbation, against torch's Jacobian-vector product.

At a state, ``delta_free w = -delta_boundary du`` with ``du`` on the input only: ``w`` on the output block is
the network's Jacobian applied to ``du``.  Used by ``tests/network/test_smooth_networks.py`` and
``tests/network/test_families.py``.
"""

import numpy as np
import scipy.sparse.linalg as spla


def tangent_response(system, dx):
    """``w`` on the free coordinates solving ``delta_free w = -delta_boundary du``, ``du`` = ``dx`` on the input
    (one sample's assembled ``system``), by substitution in the unit lower triangular ``delta_free``."""
    du = np.zeros(system.delta_boundary.shape[1])
    du[system.layout.boundary("x")] = np.ravel(dx)
    return spla.spsolve_triangular(system.delta_free.tocsr(), -(system.delta_boundary @ du), lower=True)


def torch_jvp(model, x, dx, shape):
    """torch's Jacobian-vector product of ``model`` at the one sample ``x`` along ``dx`` (per-sample ``shape``),
    flattened (float64).  Attention runs in its plain (math) kernel: the fused CPU kernel that torch picks for
    four-dimensional heads has no forward-mode derivative."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    point = torch.from_numpy(np.asarray(x, dtype=np.float64).reshape((1,) + tuple(shape)))
    tangent = torch.from_numpy(np.asarray(dx, dtype=np.float64).reshape((1,) + tuple(shape)))
    with sdpa_kernel(SDPBackend.MATH):
        _, jvp = torch.func.jvp(model, (point,), (tangent,))
    return jvp.detach().numpy().ravel()
