"""The code ConfigMap, as a plain dict (pure): the shipped sources (``code_files.read_code_files``) in one immutable
ConfigMap named by their content hash, and the volume and mount that put them back at their paths under
``CODE_ROOT``, the pods' PYTHONPATH. Every pod of a run mounts it: training, evaluation, gate, autostop. A pod
that runs one small program (the gate) mounts only the files that program imports (``imported_files``).
"""

from __future__ import annotations

import ast
import functools
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


def code_volume(code_config_map: dict, *, only: str | None = None) -> dict:
    """The code ConfigMap as a volume whose items put every key back at its path ("--" -> "/"); with ``only`` (a
    module, ``"workloads.train.control.gate"``), just the keys of the files it imports (``imported_files``), or
    every key where the ConfigMap does not hold that module."""
    keys = sorted(code_config_map["data"])
    if only is not None:
        keys = sorted(imported_files(tuple(sorted(code_config_map["data"].items())), only)) or keys
    items = [{"key": k, "path": k.replace("--", "/")} for k in keys]
    return {"name": "code", "configMap": {"name": code_config_map["metadata"]["name"], "items": items}}


@functools.lru_cache(maxsize=8)
def imported_files(data: tuple[tuple[str, str], ...], module: str) -> frozenset[str]:
    """The ConfigMap keys (``data``: its items) of ``module`` and of every shipped module it imports, at any depth
    and inside functions too, with their packages' ``__init__.py``: what ``python3 -m module`` can load. Read from
    the sources (no import), so a module named only at run time (importlib) would be missed: the gate has none,
    and its test runs it from these files alone. Empty where ``module`` is not shipped."""
    texts = dict(data)

    def key_of(name: str) -> str | None:
        base = name.replace(".", "--")
        return next((k for k in (f"{base}.py", f"{base}--__init__.py") if k in texts), None)

    if key_of(module) is None:
        return frozenset()
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        key = key_of(name)
        if key is None or key in seen:
            continue
        seen.add(key)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages
        package = name if key.endswith("__init__.py") else ".".join(parts[:-1])
        todo += _imports(ast.parse(texts[key]), package)
    return frozenset(seen)


def _imports(tree: ast.Module, package: str) -> list[str]:
    """The modules ``tree`` (a module of ``package``) imports, and for ``from a import b``, ``a.b`` too (b may be a
    module): more than it loads, never less."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[:len(parts) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return out


def code_mount() -> dict:
    """Where ``code_volume`` is mounted: ``CODE_ROOT``, the pods' PYTHONPATH."""
    return {"name": "code", "mountPath": CODE_ROOT, "readOnly": True}
