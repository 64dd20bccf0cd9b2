"""Reads ``Pulumi.<stack>.yaml`` from the project directory, as the Pulumi CLI would.

``stack_raw_config`` gives the program's raw config for a stack (through
``core.config.pulumi_config``, the CLI's serialisation, so the offline plan and the local run see
what ``pulumi up`` would); ``load_stack_config`` validates it (shape and meaning, without
the region's offerings, which need AWS) into a ``StackConfig``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from core.config.fields import ConfigError, problem, shorten
from core.config.model import StackConfig
from core.config.pulumi_config import PROJECT, decode_config, to_pulumi_config

ROOT = Path(__file__).resolve().parent.parent


# Pulumi's stack names: letters, digits, "-", "_" and "." (pulumi/pulumi: tokens.ValidateStackName), up to 100,
# and here never starting with ".": a stack's name becomes folder names (.eksbench/work/<stack>,
# results/<stack>), so "." and ".." would name the folders above them.
STACK_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
STACK_NAME_RULE = 'must be 1-100 letters, digits, ".", "_" or "-", not starting with "." (as Pulumi allows, less ".")'


def check_stack_name(stack: Any) -> str:
    """``stack`` when it is a valid stack name; ConfigError (one line: the name, the rule, an example) when not.
    Every command and API entry point asks this before a path is built from the name."""
    if not isinstance(stack, str) or not STACK_NAME.fullmatch(stack):
        raise ConfigError([problem("stack", stack, STACK_NAME_RULE, '"dev"')])
    return stack
# A stack file is a few kilobytes; anything far larger is a mistake, and YAML aliases can expand a
# small file into gigabytes (an alias bomb), so aliases are refused outright.
MAX_STACK_FILE_BYTES = 1_000_000


def stack_file(stack: str, root: Path = ROOT) -> Path:
    """``<root>/Pulumi.<stack>.yaml``; ConfigError for a name that is not a stack name (``check_stack_name``)."""
    return root / f"Pulumi.{check_stack_name(stack)}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases: ``*anchor`` references are refused."""

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not allowed in stack files, line "
                                 f"{event.start_mark.line + 1}; write the value out")
        return super().compose_node(parent, index)


def read_stack_yaml(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file, keys as written (``eksbench:x``, ``aws:region``).

    Every way a file can be unreadable (missing, too large, not UTF-8, not YAML, YAML aliases, not a
    mapping) is one ConfigError line naming the file.
    """
    path = stack_file(stack, root)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise ConfigError([f"stack={json.dumps(stack)}: no file {path.name}; stacks here: {known}"])
    size = path.stat().st_size
    if size > MAX_STACK_FILE_BYTES:
        raise ConfigError([f"{path.name}: is {size} bytes; a stack file is at most {MAX_STACK_FILE_BYTES} bytes"])
    try:
        doc = yaml.load(path.read_bytes().decode("utf-8"), Loader=_NoAliasLoader)
    except UnicodeDecodeError as e:
        raise ConfigError([f"{path.name}: is not UTF-8 text (byte {e.start}); a stack file is YAML"]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"{path.name}: is not valid YAML ({shorten(' '.join(str(e).split()))})"]) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError([f"{path.name}: must be a mapping with a config: key, not a {type(doc).__name__}"])
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([f"{path.name}: config must be a mapping of keys to values"])
    return config


def stack_raw_config(stack: str, root: Path = ROOT) -> tuple[dict[str, Any], str | None]:
    """The ``eksbench:*`` keys of a stack file (namespace stripped) and its ``aws:region``, as the program gets them."""
    return decode_config(to_pulumi_config(read_stack_yaml(stack, root)))


def load_stack_config(stack: str, root: Path = ROOT, *, cluster: bool = True) -> StackConfig:
    """The stack's validated config (shape, then meaning; offerings are checked by ``bench plan``). Raises ConfigError.
    ``cluster`` False: for a local run or a command that only reads results, which need not refuse what the cluster
    alone cannot run (``program.validation.meaning_problems``)."""
    from program.validation import validated_config
    from workloads.code_files import read_code_files

    raw, region = stack_raw_config(stack, root)
    return validated_config(raw, project=PROJECT, stack=stack, region=region, code_files=read_code_files(),
                            cluster=cluster)
