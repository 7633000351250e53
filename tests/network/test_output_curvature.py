"""The output activations' curvature term ``sum_i r_i nabla^2 phi_i(z)`` against central differences of
``J(z)^T r`` (the gradient of ``r . phi(z)`` with ``r`` held)."""

import numpy as np
import pytest

from sheaflinalg.network import activations


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "softmax"])
def test_curvature_is_the_derivative_of_the_transposed_jacobian(name):
    rng = np.random.default_rng(0)
    z, r = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    h = 1e-5
    numeric = np.empty((3, 4, 4))
    for j in range(4):
        step = np.zeros(4)
        step[j] = h
        up, down = (np.einsum("mij,mi->mj", activations.jacobian(name, z + s), r) for s in (step, -step))
        numeric[:, :, j] = (up - down) / (2 * h)
    np.testing.assert_allclose(activations.curvature(name, z, r), numeric, rtol=1e-7, atol=1e-9)


def test_the_identity_output_has_no_curvature_term():
    with pytest.raises(ValueError, match="no curvature"):
        activations.curvature("identity", np.zeros((1, 2)), np.zeros((1, 2)))
