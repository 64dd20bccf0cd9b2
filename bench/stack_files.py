"""Reads ``Pulumi.<stack>.yaml`` from the project directory, as the Pulumi CLI would.

``stack_raw_config`` gives the program's raw config for a stack (through
``spec.pulumi_config``, the CLI's serialisation, so the offline plan and the local run see
what ``pulumi up`` would); ``load_stack_config`` validates it (shape and meaning, without
the region's offerings, which need AWS) into a ``StackConfig``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from spec.config import StackConfig
from spec.fields import ConfigError
from spec.pulumi_config import PROJECT, decode_config, to_pulumi_config

ROOT = Path(__file__).resolve().parent.parent


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


def stack_raw_config(stack: str, root: Path = ROOT) -> tuple[dict[str, Any], str | None]:
    """The ``eksbench:*`` keys of a stack file (namespace stripped) and its ``aws:region``, as the program gets them."""
    return decode_config(to_pulumi_config(read_stack_yaml(stack, root)))


def load_stack_config(stack: str, root: Path = ROOT) -> StackConfig:
    """The stack's validated config (shape, then meaning; offerings are checked by ``bench plan``). Raises ConfigError."""
    from program.validation import validated_config
    from workloads.experiment_suite import read_code_files

    raw, region = stack_raw_config(stack, root)
    return validated_config(raw, project=PROJECT, stack=stack, region=region, code_files=read_code_files())
