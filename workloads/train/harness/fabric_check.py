"""The launcher's fabric figures and verdict: the all-reduce busbw curve, and the NCCL transport judged.

Pure functions over what the launcher already read (metric lines, the transport parsed from the
node logs, the pod's environment); the rules are ``core.catalog.fabric``'s. ``TransportWatch`` sees the
command's output line by line, so ``fabric: strict`` stops a run on sockets at NCCL's first INIT
line instead of after the whole run.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from core.catalog import fabric
from core.contract import summary_fields as F
from core.contract.names import ENV_EFA, ENV_FABRIC

GIB = 2**30
SOCKET_LINE = re.compile(r"NCCL INFO " + re.escape(fabric.SOCKETS) + r"\b")


def busbw_summary(lines: Sequence[Mapping[str, Any]], *, instance_type: str | None,
                  nodes: int | None) -> dict[str, Any]:
    """The busbw curve (one point per size, the last line of a size wins), its peak, the value at
    1 GiB and the comparison with the published figure (``core.catalog.fabric.busbw_check``)."""
    by_size: dict[int, Mapping[str, Any]] = {}
    for r in lines:
        if isinstance(r.get("bytes"), int) and isinstance(r.get("busbw_gbps"), (int, float)):
            by_size[r["bytes"]] = r
    curve = [{"bytes": b, "time_us": r.get("time_us"), "algbw_gbps": r.get("algbw_gbps"),
              "busbw_gbps": r["busbw_gbps"]} for b, r in sorted(by_size.items())]
    peak = max(curve, key=lambda p: p["busbw_gbps"], default=None)
    check = fabric.busbw_check([(p["bytes"], p["busbw_gbps"]) for p in curve], instance_type=instance_type,
                               nodes=nodes)
    return {F.BUSBW_CURVE: curve,
            F.BUSBW_PEAK_GBPS: peak["busbw_gbps"] if peak else None,
            "peak_at_bytes": peak["bytes"] if peak else None,
            F.BUSBW_AT_1GIB_GBPS: by_size[GIB]["busbw_gbps"] if GIB in by_size else None,
            "world_size": by_size[curve[-1]["bytes"]].get("world_size") if curve else None,
            F.BUSBW_EXPECTED: check}


def judge(metrics: Mapping[str, Any], environ: Mapping[str, str], framework: str | None) -> tuple[dict[str, Any], str | None]:
    """(summary fields: FABRIC and FLAGS, the error a strict failure gives or None)."""
    efa = environ.get(ENV_EFA) == "1"
    mode = environ.get(ENV_FABRIC) or "check"
    transport = metrics.get("nccl_transport")
    v = fabric.fabric_verdict(transport, efa_expected=efa, framework=framework, mode=mode)
    flags = [v.flag] if v.flag else []
    below = fabric.below_expected_flag((metrics.get(F.BUSBW) or {}).get(F.BUSBW_EXPECTED) or {})
    if below:
        flags.append(below)
    fields = {F.FABRIC: {"mode": mode, "efa_expected": efa, "transport": transport, "verdict": v.verdict},
              F.FLAGS: flags}
    error = (f"fabric: strict: {v.verdict} where EFA ({fabric.EFA_TRANSPORT}) was expected; "
             "check the image's aws-ofi-nccl and the pod's EFA devices") if v.fails else None
    return fields, error


class TransportWatch:
    """Under ``fabric: strict`` on an EFA pod: true at the first NCCL line naming NET/Socket."""

    def __init__(self, environ: Mapping[str, str]):
        self.armed = environ.get(ENV_EFA) == "1" and environ.get(ENV_FABRIC) == "strict"
        self.tripped = False

    def sees(self, line: str) -> bool:
        if self.armed and not self.tripped and SOCKET_LINE.search(line):
            self.tripped = True
            return True
        return False
