"""Standard JSON out, whatever floats a run produced.

Python's ``json.dumps`` writes NaN and Infinity by default, which is not JSON (RFC 8259 section 6):
``jq`` and strict parsers reject the whole file. Every JSON file and document the product writes goes
through ``dumps``: a non-finite float becomes null (the writer records why where the number matters,
e.g. a diverged run's loss), and ``allow_nan=False`` makes any float that slips past a ValueError
instead of a file nobody can read. Readers keep Python's default and still read older files with NaN.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-Infinity), at any depth, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def nonfinite_name(value: Any) -> str | None:
    """"nan", "inf" or "-inf" for a non-finite float, else None (the reason a number became null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return None


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``finite(value)`` with ``allow_nan=False``: always standard JSON."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)
