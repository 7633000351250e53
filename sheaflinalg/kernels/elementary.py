"""``exp`` and ``tanh`` in compiled code that vectorises.

libm's ``exp`` and ``tanh`` are scalar calls: a loop that calls them runs one entry at a time (SiLU's value
and slope took 8.6 ns an entry with libm's ``exp``, 3.0 ns with this one; ``docs/performance.md``, issue 32).
These are arithmetic and one table read, with no branch the compiler cannot turn into a select, and are
inlined into their callers, whose loops then vectorise.

* :func:`exp`: ``2^k exp(r)`` with ``k`` the integer nearest ``x / log 2`` and ``r = x - k log 2`` (``log
  2`` in two parts: ``k`` times the first is exact), ``exp(r)`` by its Taylor polynomial of degree 13
  (``|r| <= 0.35``: truncation below 5e-18 relative), ``2^k`` read from a table.  Within one rounding of the
  exact value wherever that is a normal double (tested against mpmath); 0 below about ``-745.1``, ``inf``
  above about ``709.8``.
* :func:`tanh`: ``-m / (2 + m)`` with ``m = expm1(-2 |x|)`` (the same reduction, ``2^k expm1(r) + (2^k -
  1)`` with ``expm1(r)`` by its Taylor polynomial without the constant), and the sign of ``x``: no
  cancellation near 0, where ``(1 - e) / (1 + e)`` would lose ``1 / |x|`` roundings.  Within a few roundings
  of the exact value (tested against mpmath).
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
def tanh(x):
    """``tanh(x)`` for a float ``x`` (NaN for NaN), within a few roundings of the exact value."""
    t = -2.0 * abs(x)
    t = t if t > -40.0 else -40.0               # expm1(-40) is -1 to float64's precision; NaN becomes -40
    k = math.floor(t * INVERSE_LOG2 + 0.5)
    r = (t - k * LOG2_HIGH) - k * LOG2_LOW
    q = INVERSE_FACTORIALS[13]
    for n in range(12, 0, -1):
        q = q * r + INVERSE_FACTORIALS[n]
    power = POWERS_OF_TWO[k + 1076]
    m = power * (q * r) + (power - 1.0)         # expm1(t) = 2^k expm1(r) + (2^k - 1)
    return x if x != x else math.copysign(-m / (2.0 + m), x)
