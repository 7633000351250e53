"""The standard normal's distribution function and density in compiled code that vectorises.

libm's ``erf`` and ``erfc`` are scalar calls: GELU's value and slope took 21 ns an entry with them, about a
tenth of a vision transformer's training epoch (``docs/performance.md``, issue 32).  The function here is
arithmetic and :func:`~.elementary.exp`, with no branch the compiler cannot turn into a select, so the loops
that call it vectorise (AVX-512 here: GELU's value and slope in 7 ns an entry).

* :func:`normal_lower_tail`: ``Phi(-y)`` and ``exp(-y^2 / 2)`` for ``y >= 0``.  ``Phi(-y) = exp(-y^2 / 2)
  R(y)``, and ``R(y) (L + y)`` is a polynomial of degree 24 in ``Z = (L - y) / (L + y)`` (``L = 4``, ``Z`` in
  ``[-1, 1]``), interpolated in 40-digit arithmetic by ``scripts/normal_tail_coefficients.py`` (relative
  error below 7e-17 on ``[0, 40]``).  ``y^2`` is split into two doubles (Veltkamp's split) so that the
  exponential does not inherit the rounding of ``y^2`` (cephes' ``ndtr`` loses about ``y^2`` roundings in the
  tails that way): the tail keeps its relative accuracy, a few roundings at every ``y`` (tested against
  mpmath).
"""

import numpy as np
from numba import njit

from .elementary import exp

#: The scale ``L`` of the tail's variable and the interpolant's monomial coefficients in ``Z``, constant first
#: (printed by ``scripts/normal_tail_coefficients.py``; ``tests/kernels/test_normal.py`` regenerates them).
TAIL_SCALE = 4.0
TAIL_COEFFICIENTS = np.array([
    0.7552851304157515,
    0.6078966419718923,
    0.38713740074221453,
    0.18652185795963533,
    0.06039657489093607,
    0.007540188967419565,
    -0.0034796923673884156,
    -0.0016308184678064444,
    0.00013334431270030784,
    0.00023109501999200649,
    -1.908265085342679e-06,
    -3.5145122560125815e-05,
    7.167263978705016e-07,
    5.921638801978817e-06,
    -6.299974265164222e-07,
    -1.0248325060946323e-06,
    2.727176083262385e-07,
    1.5982676610438677e-07,
    -8.713294621467491e-08,
    -1.7881872409503415e-08,
    2.1604426842720404e-08,
    6.021003727951476e-10,
    -3.798041859957449e-09,
    1.1742107539247065e-10,
    3.51569242668093e-10,
])
#: ``2^27 + 1``: Veltkamp's split of a double into two halves of 26 bits.
_SPLITTER = 134217729.0


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def normal_lower_tail(y):
    """``(Phi(-y), exp(-y^2 / 2))`` for ``y >= 0`` (both 0 beyond 40, where they underflow, and for NaN).

    Examples
    --------
    >>> tail, density = normal_lower_tail(1.0)
    >>> f"{tail:.15f} {density:.15f}"          # Phi(-1), exp(-1/2)
    '0.158655253931457 0.606530659712633'
    """
    y = y if y < 40.0 else 40.0
    c = y * _SPLITTER
    high = c - (c - y)
    low = y - high
    square = y * y
    square_low = ((high * high - square) + 2.0 * high * low) + low * low      # y^2 = square + square_low
    density = exp(-0.5 * square) * (1.0 - 0.5 * square_low)
    q = 1.0 / (TAIL_SCALE + y)
    z = (TAIL_SCALE - y) * q
    p = TAIL_COEFFICIENTS[24]
    for j in range(23, -1, -1):
        p = p * z + TAIL_COEFFICIENTS[j]
    return p * q * density, density
