"""Active-lane masks: None means every lane of the batch; otherwise a bool array over the lanes.
Masks are never modified in place. A condition may be a numpy bool scalar (uniform)."""
from __future__ import annotations

import numpy as np


def m_and(m, c):
    """Lanes of `m` where condition `c` holds."""
    if not isinstance(c, np.ndarray):
        return m if c else False
    if m is None:
        return c
    if m is False:
        return False
    return m & c


def m_andnot(m, c):
    """Lanes of `m` where condition `c` does not hold."""
    if not isinstance(c, np.ndarray):
        return False if c else m
    if m is None:
        return ~c
    if m is False:
        return False
    return m & ~c


def m_or(a, b):
    if a is None or b is None:
        return None
    if a is False:
        return b
    if b is False:
        return a
    return a | b


def m_any(m) -> bool:
    if m is None:
        return True
    if m is False:
        return False
    return np.count_nonzero(m) > 0


def m_bits(m, n: int) -> np.ndarray:
    """The mask as a bool array of n lanes."""
    if m is None:
        return np.ones(n, np.bool_)
    if m is False:
        return np.zeros(n, np.bool_)
    return m


def m_norm(m):
    """False for no lane, None for all lanes, else the array."""
    if m is None or m is False:
        return m
    active = np.count_nonzero(m)        # one pass, cheaper than any() and all()
    if not active:
        return False
    if active == m.size:
        return None
    return m
