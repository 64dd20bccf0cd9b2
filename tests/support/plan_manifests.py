"""The Kubernetes objects of a plan, written back as manifest files a scanner can read.

``python -m bench plan <stack> --json`` (or ``program.offline.evaluate``) gives each registered
resource with its inputs; for ``kubernetes:*`` resources those inputs are the manifest
(apiVersion, kind, metadata and the kind's fields, camelCase). Providers are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml


def kubernetes_objects(resources: Iterable[Mapping[str, Any]]) -> list[tuple[str, dict]]:
    """(resource name, manifest) for every Kubernetes object among ``resources``."""
    out = []
    for r in resources:
        if not r["type"].startswith("kubernetes:") or r["type"].startswith("pulumi:providers:"):
            continue
        manifest = _ints(dict(r["inputs"]))
        _, group_version, kind = r["type"].split(":")
        manifest.setdefault("kind", kind)
        manifest.setdefault("apiVersion", group_version.removeprefix("core/"))
        out.append((r["name"], manifest))
    return out


def _ints(value: Any) -> Any:
    """The mock engine passes numbers as floats (protobuf Struct): 2379.0 back to 2379."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def write_manifests(resources: Iterable[Mapping[str, Any]], directory: Path) -> list[Path]:
    """One YAML file per object, named after the Pulumi resource."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, manifest in kubernetes_objects(resources):
        path = directory / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        paths.append(path)
    return paths


if __name__ == "__main__":  # python -m tests.support.plan_manifests PLAN.json OUTDIR
    import json
    import sys

    plan = json.loads(Path(sys.argv[1]).read_text())
    print(len(write_manifests(plan["resources"], Path(sys.argv[2]))), "manifests")
