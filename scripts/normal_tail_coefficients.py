"""Derive the coefficients of ``sheaflinalg/kernels/normal.py``'s lower tail of the standard normal.

``Phi(-y) = exp(-y^2 / 2) R(y)`` for ``y >= 0``, and ``R(y) (L + y)`` is a smooth function of
``Z = (L - y) / (L + y)`` on ``[-1, 1]`` (``y`` from infinity to 0; ``R`` falls like ``1 / (y sqrt(2 pi))``,
so the product tends to ``1 / sqrt(2 pi)`` at ``Z = -1``).  Its polynomial of degree ``DEGREE`` in ``Z``
interpolating at the Chebyshev points is computed in 40-digit arithmetic (mpmath), and its monomial
coefficients rounded to float64 are the kernel's table.  With ``L = 4`` and degree 24 the interpolant's
relative error with its coefficients rounded to float64 is below 7e-17 on ``[0, 40]`` (:func:`interpolation_error`), under a third of float64's
rounding; the float64 evaluation then costs a few roundings (tested against mpmath in
``tests/kernels/test_normal.py``, which also regenerates this table and compares it bit for bit).

Run: ``.venv/bin/python scripts/normal_tail_coefficients.py`` prints the table as a Python literal.
"""

import mpmath as mp
import numpy as np

SCALE, DEGREE, DIGITS = 4, 24, 40


def tail_factor(y):
    """``R(y) = Phi(-y) exp(y^2 / 2)`` in mpmath's working precision."""
    y = mp.mpf(y)
    return mp.erfc(y / mp.sqrt(2)) / 2 * mp.exp(y * y / 2)


def _smooth_part(Z):
    """``R(y) (L + y)`` at ``Z = (L - y) / (L + y)`` (its limit ``1 / sqrt(2 pi)`` at ``Z = -1``)."""
    if Z <= -1:
        return 1 / mp.sqrt(2 * mp.pi)
    y = SCALE * (1 - Z) / (1 + Z)
    return tail_factor(y) * (SCALE + y)


def coefficients():
    """The float64 monomial coefficients (constant first) of the interpolant in ``Z``."""
    with mp.workdps(DIGITS):
        n = DEGREE + 1
        nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
        vandermonde = mp.matrix([[x ** j for j in range(n)] for x in nodes])
        exact = mp.lu_solve(vandermonde, mp.matrix([_smooth_part(x) for x in nodes]))
        return np.array([float(c) for c in exact])


def interpolation_error(samples=2001):
    """The largest relative error of the interpolant (float64 coefficients, exact arithmetic) on ``[0, 40]``."""
    table = coefficients()
    with mp.workdps(DIGITS):
        worst = mp.mpf(0)
        for y in np.concatenate([np.linspace(0.0, 40.0, samples), np.geomspace(1e-8, 40.0, 200)]):
            y = mp.mpf(float(y))
            Z = (SCALE - y) / (SCALE + y)
            p = mp.mpf(0)
            for c in table[::-1]:
                p = p * Z + mp.mpf(float(c))
            worst = max(worst, abs(p / (SCALE + y) / tail_factor(y) - 1))
        return float(worst)


if __name__ == "__main__":
    print("TAIL_COEFFICIENTS = np.array([")
    for c in coefficients():
        print(f"    {float(c)!r},")
    print("])")
    print(f"# interpolation error on [0, 40]: {interpolation_error():.2e}")
