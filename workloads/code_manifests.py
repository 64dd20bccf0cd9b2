"""The code ConfigMap, as a plain dict (pure): the shipped sources (``code_files.read_code_files``) in one immutable
ConfigMap named by their content hash, and the volume and mount that put them back at their paths under
``CODE_ROOT``, the pods' PYTHONPATH. Every pod of a run mounts it: training, evaluation, gate, autostop.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

from infra.labels import labels, metadata
from workloads.launch.common import CODE_ROOT

CODE_CONFIG_MAP_LIMIT = 1024 * 1024  # a ConfigMap holds at most 1 MiB (Kubernetes ConfigMap docs)


def code_config_map_manifest(files: Mapping[str, str], *, namespace: str, prefix: str = "eksbench-code") -> dict:
    """An immutable ConfigMap of the shipped sources, named by their content hash.

    ``files`` maps paths relative to the repository root (``"core/contract/train_args.py"``,
    ``"workloads/train/harness/launch.py"``) to their text (code_files.read_code_files). A code
    change gives a new name, so the Jobs that mount it are replaced (rerun) instead of having
    their code swapped under running pods. Keys may not contain "/", so
    "/" is written as "--" (ConfigMap keys: [-._a-zA-Z0-9]+).
    """
    data = {}
    for path, text in sorted(files.items()):
        if "--" in path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"code file {path!r}: must be a relative path without '--' or '..'")
        data[path.replace("/", "--")] = text
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CODE_CONFIG_MAP_LIMIT:
        raise ValueError(f"training code is {size} bytes; a ConfigMap holds 1 MiB at most. "
                         "Bake the code into an image (workloads/Dockerfile) and set the experiments' image")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    return {"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
            "metadata": metadata(f"{prefix}-{digest}", namespace, label_set=labels(component="code")),
            "data": data}


def code_volume(code_config_map: dict) -> dict:
    """The code ConfigMap as a volume whose items put every key back at its path ("--" -> "/")."""
    items = [{"key": k, "path": k.replace("--", "/")} for k in sorted(code_config_map["data"])]
    return {"name": "code", "configMap": {"name": code_config_map["metadata"]["name"], "items": items}}


def code_mount() -> dict:
    """Where ``code_volume`` is mounted: ``CODE_ROOT``, the pods' PYTHONPATH."""
    return {"name": "code", "mountPath": CODE_ROOT, "readOnly": True}
