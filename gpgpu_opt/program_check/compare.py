"""Do two runs of a program (built as written, built optimized) give the same results? What they print is
compared token by token, lines that report a time dropped (they differ by design), numbers within a
relative tolerance (floating-point sums reassociate in an optimized kernel), everything else exactly; the
files they write are compared the same way, binary files byte for byte, and so are their exit statuses."""
from __future__ import annotations

import math
import re

#: Lines that report how long something took (or how fast): dropped before comparing.
TIME_LINE = re.compile(r"time|runtime|elapsed|\bms\b|\bsec|seconds|GB/s|GFLOP|^Exec:|\btook\b|GPU Execution|"
                       r"\d s\b", re.IGNORECASE)
_TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|\S")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(nan|inf)$", re.IGNORECASE)
#: Below this magnitude two numbers are equal whatever their ratio (a sum that cancels to about zero).
ABSOLUTE = 1e-5


def tokens(text: str) -> list[str]:
    kept = [line for line in text.splitlines() if not TIME_LINE.search(line)]
    return _TOKEN.findall("\n".join(kept))


def same_token(a: str, b: str, tolerance: float) -> bool:
    if a == b:
        return True
    if _NUMBER.match(a) and _NUMBER.match(b):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return abs(x - y) <= max(ABSOLUTE, tolerance * max(abs(x), abs(y)))
    return False


def text_difference(naive: str, optimized: str, what: str, tolerance: float) -> str | None:
    """The first difference of two texts (None: they agree), as 'what: token N: naive 'x', optimized 'y''."""
    a, b = tokens(naive), tokens(optimized)
    for i, (x, y) in enumerate(zip(a, b)):
        if not same_token(x, y, tolerance):
            return f"{what}: token {i}: naive '{x}', optimized '{y}'"
    if len(a) != len(b):
        return f"{what}: naive has {len(a)} tokens, optimized {len(b)}"
    return None


def bytes_difference(naive: bytes, optimized: bytes, what: str, tolerance: float) -> str | None:
    """Text files compared as text, others byte for byte."""
    try:
        return text_difference(naive.decode("utf-8"), optimized.decode("utf-8"), what, tolerance)
    except UnicodeDecodeError:
        return None if naive == optimized else f"{what}: binary files differ"
