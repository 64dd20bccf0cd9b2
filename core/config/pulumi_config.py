"""How the Pulumi CLI hands a stack's config to the program, and how the program reads it back.

The CLI passes top-level scalars as strings and objects/arrays as JSON (it sets
``PULUMI_CONFIG`` or the runtime's config store that way). ``to_pulumi_config`` does the
CLI's half for a stack file read offline, so ``bench plan`` and the local run see exactly
what ``pulumi up`` would; ``decode_config`` is the program's half: the project's raw keys,
objects decoded, and the AWS region.
"""

from __future__ import annotations

import json
from typing import Any

PROJECT = "eksbench"


def to_pulumi_config(config: dict[str, Any]) -> dict[str, str]:
    """Serialise like the CLI does for PULUMI_CONFIG: scalars as strings, the rest as JSON."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            out[key] = "<secret>"
        elif isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def decode_config(pulumi_config: dict[str, str], project: str = PROJECT) -> tuple[dict[str, Any], str | None]:
    """Split CLI-style config into this project's raw keys (objects decoded) and the AWS region.

    Only values that look like JSON objects or arrays are decoded: a scalar stays a string
    so that ``"1.30"`` is never turned into the float 1.3.
    """
    raw: dict[str, Any] = {}
    for key, value in pulumi_config.items():
        ns, _, name = key.partition(":")
        if ns != project:
            continue
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        raw[name] = value
    return raw, pulumi_config.get("aws:region")
