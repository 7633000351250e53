"""``exp`` and the standard normal's distribution function and density in compiled code that vectorises.

libm's ``exp``, ``erf`` and ``erfc`` are scalar calls: GELU's value and slope took 21 ns an entry with them,
about a tenth of a vision transformer's training epoch (``docs/performance.md``, issue 32).  The functions
here are arithmetic and one table read, with no branch the compiler cannot turn into a select, so the loops
that call them vectorise (AVX-512 here: GELU's value and slope in 6.5 ns an entry).

* :func:`exp`: ``2^k exp(r)`` with ``k`` the integer nearest ``x / log 2`` and ``r = x - k log 2`` (``log
  2`` in two parts: ``k`` times the first is exact), ``exp(r)`` by its Taylor polynomial of degree 13
  (``|r| <= 0.35``: truncation below 5e-18 relative), ``2^k`` read from a table.  Within about one rounding
  of the exact value (tested against mpmath); 0 below about ``-745.1``, ``inf`` above about ``709.8``.
* :func:`normal_lower_tail`: ``Phi(-y)`` and ``exp(-y^2 / 2)`` for ``y >= 0``.  ``Phi(-y) = exp(-y^2 / 2)
  R(y)``, and ``R(y) (L + y)`` is a polynomial of degree 24 in ``Z = (L - y) / (L + y)`` (``L = 4``, ``Z`` in
  ``[-1, 1]``), interpolated in 40-digit arithmetic by ``scripts/normal_tail_coefficients.py`` (relative
  error below 7e-17 on ``[0, 40]``).  ``y^2`` is split into two doubles (Veltkamp's split) so that the
  exponential does not inherit the rounding of ``y^2`` (cephes' ``ndtr`` loses about ``y^2`` roundings in the
  tails that way): the tail keeps its relative accuracy, a few roundings at every ``y`` (tested against
  mpmath).
"""

import math

import numpy as np
from numba import njit

#: ``log 2`` rounded to 24 significant bits (``k`` times it is exact for every ``k`` that occurs), the rest
#: of it (mpmath, 40 digits), and ``1 / log 2``.
LOG2_HIGH = 0.6931471824645996
LOG2_LOW = -1.904654299957768e-09
INVERSE_LOG2 = 1.4426950408889634
#: ``2^k`` for ``k`` from ``-1076`` to ``1023`` (index ``k + 1076``; the first two round to 0 and are not read).
POWERS_OF_TWO = np.array([math.ldexp(1.0, k) for k in range(-1076, 1024)])
#: ``1 / n!`` for ``n = 0 .. 13``: ``exp``'s Taylor polynomial on ``|r| <= log(2) / 2``.
INVERSE_FACTORIALS = np.array([1.0 / math.factorial(n) for n in range(14)])
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
def exp(x):
    """``e^x`` for a float ``x`` (NaN for NaN), within about one rounding of the exact value."""
    t = x if x > -745.5 else -745.5             # NaN becomes -745.5 here and is given back at the end
    t = t if t < 710.0 else 710.0
    k = math.floor(t * INVERSE_LOG2 + 0.5)
    r = (t - k * LOG2_HIGH) - k * LOG2_LOW
    p = INVERSE_FACTORIALS[13]
    for n in range(12, -1, -1):
        p = p * r + INVERSE_FACTORIALS[n]
    index = k + 1076
    index = index + 64 if k < -1000 else index            # a subnormal result: scaled by 2^64, then back by one
    scale = 2.0 ** -64 if k < -1000 else (2.0 if index > 2099 else 1.0)    # rounding; k = 1024: 2^1023 times 2
    index = index if index < 2099 else 2099
    return x if x != x else p * POWERS_OF_TWO[index] * scale


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def normal_lower_tail(y):
    """``(Phi(-y), exp(-y^2 / 2))`` for ``y >= 0`` (both 0 beyond 40, where they underflow, and for NaN).

    Examples
    --------
    >>> tail, density = normal_lower_tail(1.0)
    >>> round(tail, 15), round(density, 15)          # Phi(-1), exp(-1/2)
    (0.158655253931457, 0.60653065971263)
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
