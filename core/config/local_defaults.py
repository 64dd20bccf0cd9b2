"""What a stack file may leave out when its experiments only run on this machine (``eksbench run --local``).

A cluster needs its GPU node groups (``gpu_node_groups``), and the shape check requires them: an experiment's
node group, its GPUs per node and its image default from them. A local run trains on this machine's CPUs (or
GPUs), scaled down by ``local:``, and reads none of them; so a stack file without node groups, such as the
README's few-line experiment, gets one stand-in group that fits every experiment at once. The cluster's other
required keys (``cluster.public_access_cidrs``, ``results.home_stack``) are asked only of a stack that builds a
cluster (``program.validation.meaning_problems``, ``cluster``). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

# The stand-in group: 8 GPUs a node (the most any catalog type has, so any gpus_per_node fits) with bf16 (L40S),
# and no EFA (a local run has no fabric to judge).
LOCAL_GROUP = {"name": "local", "instance_type": "g6e.48xlarge", "efa": False}


def nodes_at_once(experiments: Any) -> int:
    """The nodes every experiment entry asks at its largest, all at once (a sweep's values side by side); at least 1.
    A value the shape check will refuse counts as 1."""
    total = 0
    for entry in experiments if isinstance(experiments, list) else []:
        nodes = entry.get("nodes", 1) if isinstance(entry, Mapping) else 1
        values = nodes if isinstance(nodes, list) else [nodes]
        for v in values:
            if isinstance(v, str) and re.fullmatch(r"\d+(:\d+)?", v):
                v = int(v.rsplit(":", 1)[-1])
            total += v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 1
    return max(total, 1)


def for_local_run(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (the ``eksbench:*`` keys) with the stand-in GPU node group where it names none."""
    if "gpu_node_groups" in raw:
        return dict(raw)
    size = nodes_at_once(raw.get("experiments"))
    return {**raw, "gpu_node_groups": [{**LOCAL_GROUP, "max_size": size, "desired_size": size}]}
