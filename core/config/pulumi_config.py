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


SECRET = "<secret>"  # what a secure value is serialised as offline (its plain text is never read here)


def to_pulumi_value(value: Any) -> str:
    """One value as the CLI passes it: a scalar as a string, an object or array as JSON."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def to_pulumi_config(config: dict[str, Any]) -> dict[str, str]:
    """Serialise like the CLI does for PULUMI_CONFIG: scalars as strings, the rest as JSON."""
    return {key: to_pulumi_value(value) for key, value in config.items()}


# Namespaces a stack file may hold besides the project's own: the providers the program uses or a user may
# configure (aws:region, kubernetes:..., eks:...) and Pulumi's (pulumi:tags). Their keys are not the program's
# and pass untouched; a namespace that is none of these but within a typo of one is refused (misspelled_key).
OTHER_NAMESPACES = ("aws", "awsx", "eks", "kubernetes", "pulumi", "random", "tls", "command")


def edit_distance(a: str, b: str) -> int:
    """The single-character inserts, deletes, substitutions and swaps of neighbours that turn ``a`` into ``b``
    (optimal string alignment: ``asw`` is 1 from ``aws``, as a typist slips)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def misspelled_key(key: str, project: str = PROJECT) -> str | None:
    """The key ``key`` was probably meant to be when its namespace is unknown yet a typo of a known one
    (``eksbnech:run_id`` -> ``eksbench:run_id``): within 2 edits of the project's or a long namespace, 1 of a
    short one (aws, eks, tls, whose 2-edit neighbours are other words); else None."""
    ns, sep, name = key.partition(":")
    if not sep or ns in (project, *OTHER_NAMESPACES):
        return None
    for known in (project, *OTHER_NAMESPACES):
        if edit_distance(ns.lower(), known) <= (1 if len(known) <= 4 else 2):
            return f"{known}:{name}"
    return None


def decode_config(pulumi_config: dict[str, str], project: str = PROJECT) -> tuple[dict[str, Any], str | None]:
    """Split CLI-style config into this project's raw keys (objects decoded) and the AWS region.

    Only values that look like JSON objects or arrays are decoded: a scalar stays a string
    so that ``"1.30"`` is never turned into the float 1.3. A key of a misspelled namespace
    (``misspelled_key``) is kept whole (``eksbnech:run_id``), so the parser refuses it by name
    instead of the stack silently running on the default.
    """
    raw: dict[str, Any] = {}
    for key, value in pulumi_config.items():
        ns, _, name = str(key).partition(":")
        if ns != project:
            if misspelled_key(str(key), project) is None:
                continue
            name = str(key)
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        raw[name] = value
    return raw, pulumi_config.get("aws:region")
