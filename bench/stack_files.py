"""Reads ``Pulumi.<stack>.yaml`` the way the Pulumi CLI hands config to the program.

The CLI passes top-level scalars as strings and objects/arrays as JSON; ``to_pulumi_config``
reproduces that, so the offline plan and the local runner see exactly what ``pulumi up``
would. ``load_stack_config`` goes one step further and returns the parsed StackConfig.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from spec.config import StackConfig, parse_stack_config
from spec.fields import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "eksbench"


def stack_file(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def read_stack_yaml(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file, keys as written (``eksbench:x``, ``aws:region``)."""
    path = stack_file(stack, root)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise ConfigError([f"stack={json.dumps(stack)}: no file {path.name}; stacks here: {known}"])
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError([f"{path.name}: is not valid YAML ({e})"]) from None
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([f"{path.name}: config must be a mapping of keys to values"])
    return config


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


def load_stack_config(stack: str, root: Path = ROOT) -> StackConfig:
    raw, region = decode_config(to_pulumi_config(read_stack_yaml(stack, root)))
    return parse_stack_config(raw, project=PROJECT, stack=stack, region=region)
