"""Validates Kubernetes objects against the OpenAPI schema of the cluster's version.

kubernetes-validate ships the schemas, so no cluster is needed. Strict mode rejects
fields the schema does not know, which catches misspelt keys in our builders.
"""

from __future__ import annotations

import kubernetes_validate

from core.config.model import Cluster

K8S_VERSION = Cluster().kubernetes_version


def schema_errors(obj: dict, version: str = K8S_VERSION) -> list[str]:
    """An empty list when ``obj`` is valid; otherwise what is wrong, one line each."""
    try:
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}: {e.message} at {list(e.path)}"]
    except kubernetes_validate.utils.SchemaNotFoundError as e:
        return [f"{obj.get('kind')}: no schema ({e})"]
    return []


def assert_valid(obj: dict, version: str = K8S_VERSION) -> None:
    errors = schema_errors(obj, version)
    assert not errors, "\n".join(errors)
