"""Reads ``Pulumi.<stack>.yaml`` from the project directory, as the Pulumi CLI would.

``stack_raw_config`` gives the program's raw config for a stack (through
``core.config.pulumi_config``, the CLI's serialisation, so the offline plan and the local run see
what ``pulumi up`` would); ``load_stack_config`` validates it (shape and meaning, without
the region's offerings, which need AWS) into a ``StackConfig``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from core.config.fields import ConfigError, problem, shorten
from core.config.local_defaults import for_local_run
from core.config.model import StackConfig
from core.config.overrides import (
    MAX_VALUE_DEPTH,
    VALUE_RULE,
    Overrides,
    SetError,
    Setting,
    parse_path,
    split_setting,
    value_problem,
)
from core.config.pulumi_config import PROJECT, decode_config, to_pulumi_config
from workloads.train.common.files import FileTooLarge, NotRegularFile, read_regular

ROOT = Path(__file__).resolve().parent.parent


# Pulumi's stack names: letters, digits, "-", "_" and "." (pulumi/pulumi: tokens.ValidateStackName), up to 100,
# and here never starting with ".": a stack's name becomes folder names (.eksbench/work/<stack>,
# results/<stack>), so "." and ".." would name the folders above them.
STACK_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
STACK_NAME_RULE = 'must be 1-100 letters, digits, ".", "_" or "-", not starting with "." (as Pulumi allows, less ".")'


# A stack file's name, as Pulumi spells it (``Pulumi.<stack>.yaml``; ``.yml`` is a common slip of the hand).
STACK_FILE = re.compile(r"Pulumi\.(?P<stack>.+)\.ya?ml")


def stack_file_parts(given: str) -> tuple[str, str] | None:
    """(its folder, the stack) when ``given``, where a stack name was expected, is the path of a stack file
    (``tests/stacks/Pulumi.frameworks.yaml`` -> ``("tests/stacks", "frameworks")``); None when it is not one."""
    folder, _, name = given.replace(os.sep, "/").rpartition("/")
    match = STACK_FILE.fullmatch(name)
    return (folder or ".", match["stack"]) if match else None


def check_stack_name(stack: Any) -> str:
    """``stack`` when it is a valid stack name; ConfigError (one line: the name, the rule, an example) when not.
    Every command and API entry point asks this before a path is built from the name."""
    if not isinstance(stack, str) or not STACK_NAME.fullmatch(stack):
        parts = stack_file_parts(stack) if isinstance(stack, str) else None
        if parts:
            raise ConfigError([f"stack={json.dumps(stack)}: is a stack file's path, not a stack name; name the stack "
                               f"({parts[1]}) and give its folder ({parts[0]}) as the project folder"])
        raise ConfigError([problem("stack", stack, STACK_NAME_RULE, '"dev"')])
    return stack
# A stack file is a few kilobytes; anything far larger is a mistake, and YAML aliases can expand a
# small file into gigabytes (an alias bomb), so aliases are refused outright.
MAX_STACK_FILE_BYTES = 1_000_000


def stack_file(stack: str, root: Path = ROOT) -> Path:
    """``<root>/Pulumi.<stack>.yaml``; ConfigError for a name that is not a stack name (``check_stack_name``)."""
    return root / f"Pulumi.{check_stack_name(stack)}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    """The stacks whose file is a regular file (a named pipe or a folder named like one is no stack)."""
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml") if p.is_file())


class DuplicateKeys(yaml.YAMLError):
    """Mapping keys given more than once: (key path, first line, repeated line) each, lines from 1."""

    def __init__(self, found: list[tuple[str, int, int]]):
        self.found = found
        super().__init__("; ".join(f"{key} given twice (lines {a} and {b})" for key, a, b in found))


def _key_path(parent: str, key: Any) -> str:
    return f"{parent}.{key}" if parent else str(key)


class _StackFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader for stack files: ``*anchor`` references are refused, and so is a mapping key given
    twice (PyYAML keeps the last one silently: a node group's second ``max_size`` would win unseen). A plain
    ``2026-12-07`` stays text, as the Pulumi CLI (go-yaml v3, YAML 1.2) reads it, not a date JSON cannot carry."""

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in rules if not tag.endswith(":timestamp")]
                               for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not allowed in stack files, line "
                                 f"{event.start_mark.line + 1}; write the value out")
        return super().compose_node(parent, index)

    def construct_document(self, node):  # noqa: ANN001 - PyYAML's signature
        found: list[tuple[str, int, int]] = []
        self._duplicates(node, "", found)
        if found:
            raise DuplicateKeys(found)
        return super().construct_document(node)

    def _duplicates(self, node: yaml.Node, path: str, found: list[tuple[str, int, int]]) -> None:
        """Every key given twice in ``node``'s mappings, as a constructed key compares (``1`` and ``0x1`` too)."""
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._duplicates(item, f"{path}[{i}]", found)
        elif isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = self._scalar_key(key_node)
                line = key_node.start_mark.line + 1
                if key is not None and key in first:
                    found.append((_key_path(path, key), first[key], line))
                elif key is not None:
                    first[key] = line
                self._duplicates(value_node, _key_path(path, key if key is not None else "?"), found)

    def _scalar_key(self, node: yaml.Node) -> Any:
        """A plain key as the constructor will make it; None for a merge key (<<) or one that is not a scalar."""
        if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
            return None
        try:
            key = self.construct_object(node)
            hash(key)
        except (yaml.YAMLError, TypeError, ValueError):
            return (node.tag, node.value)
        return key


def _read_stack_bytes(path: Path) -> bytes:
    """The file's bytes, at most MAX_STACK_FILE_BYTES; ConfigError for a file that is not a regular one or is
    larger (``workloads.train.common.files.read_regular``: never blocks on a named pipe)."""
    try:
        return read_regular(path, MAX_STACK_FILE_BYTES)
    except NotRegularFile as e:
        raise ConfigError([f"{path.name}: {e.strerror}; a stack file is a YAML file (Pulumi.<stack>.yaml)"]) from None
    except FileTooLarge as e:
        raise ConfigError([f"{path.name}: {e.strerror}; a stack file is at most {MAX_STACK_FILE_BYTES} bytes"]
                          ) from None
    except OSError as e:
        raise ConfigError([f"{path.name}: cannot be read ({e.strerror})"]) from None


def read_stack_yaml(stack: str, root: Path = ROOT) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file, keys as written (``eksbench:x``, ``aws:region``).

    Every way a file can be unreadable (missing, not a regular file, too large, not UTF-8, not YAML, YAML
    aliases, a key given twice, not a mapping) is one ConfigError line naming the file.
    """
    path = stack_file(stack, root)
    if not path.exists():
        known = ", ".join(available_stacks(root)) or "none"
        raise ConfigError([f"stack={json.dumps(stack)}: no file {path.name}; stacks here: {known}"])
    raw = _read_stack_bytes(path)
    try:
        doc = yaml.load(raw.decode("utf-8"), Loader=_StackFileLoader)
    except UnicodeDecodeError as e:
        raise ConfigError([f"{path.name}: is not UTF-8 text (byte {e.start}); a stack file is YAML"]) from None
    except DuplicateKeys as e:
        raise ConfigError([f"{path.name}: line {b}: {shorten(key, 120)} is given twice (lines {a} and {b}); give "
                           f"each key once, with the value you mean" for key, a, b in e.found]) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"{path.name}: is not valid YAML ({shorten(' '.join(str(e).split()))})"]) from None
    except RecursionError:
        raise ConfigError([f"{path.name}: lists and maps nested more than {MAX_VALUE_DEPTH} deep; {VALUE_RULE}"]
                          ) from None
    except (ValueError, TypeError, OverflowError) as e:  # a tag's constructor: !!int abc, a 5,000-digit number
        raise ConfigError([f"{path.name}: a value cannot be read ({shorten(str(e), 80)}); {VALUE_RULE}"]) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError([f"{path.name}: must be a mapping with a config: key, not a {type(doc).__name__}"])
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([f"{path.name}: config must be a mapping of keys to values"])
    bad = [f"{path.name}: {shorten(str(key), 120)}: {problem}; {VALUE_RULE}" for key, value in config.items()
           if (problem := value_problem(value)) is not None]
    if bad:
        raise ConfigError(bad)
    return config


def stack_raw_config(stack: str, root: Path = ROOT,
                     overrides: Overrides = Overrides()) -> tuple[dict[str, Any], str | None]:
    """The ``eksbench:*`` keys of a stack file (namespace stripped) and its ``aws:region``, as the program gets them,
    with the command line's ``--set`` values (``overrides``) applied. Raises SetError."""
    return decode_config(overrides.apply(to_pulumi_config(read_stack_yaml(stack, root))))


def load_stack_config(stack: str, root: Path = ROOT, *, cluster: bool = True,
                      overrides: Overrides = Overrides()) -> StackConfig:
    """The stack's validated config (shape, then meaning; offerings are checked by ``bench plan``), ``overrides``
    applied (a problem of a value they set says so), only ``overrides.experiment`` where one is named. Raises
    ConfigError. ``cluster`` False: for a local run or a command that only reads results, which need not refuse what
    the cluster alone cannot run (``program.validation.meaning_problems``), nor need the cluster's node groups
    (``core.config.local_defaults``)."""
    from program.validation import validated_config
    from workloads.code_files import read_code_files

    try:
        raw, region = stack_raw_config(stack, root, overrides)
    except SetError as e:
        raise ConfigError([str(e)]) from None
    if not cluster:
        raw = for_local_run(raw)
    try:
        return validated_config(raw, project=PROJECT, stack=stack, region=region, code_files=read_code_files(),
                                cluster=cluster, experiment=overrides.experiment)
    except ConfigError as e:
        raise ConfigError(overrides.annotate(e.problems)) from None


class _ValueLoader(_StackFileLoader):
    """A ``--set`` value as YAML 1.2's core schema reads a scalar, as the Pulumi CLI (go-yaml v3) reads a stack file:
    ``2`` an integer, ``0.5`` a number, ``true`` a boolean, and ``1:4`` or ``010`` text, where PyYAML's YAML 1.1
    would read 64 (base 60) and 8 (octal)."""

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in rules if tag.rsplit(":", 1)[-1] not in
                                       ("bool", "int", "float", "null", "timestamp")]
                               for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}


for _tag, _rule, _first in (
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("int", r"^[-+]?[0-9]+$", "-+0123456789"),
        ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789"),
        ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""])):
    _ValueLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_rule), list(_first))
_ValueLoader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: int(loader.construct_scalar(node)))


def parse_setting(text: str) -> Setting:
    """One ``--set KEY=VALUE``: the key a Pulumi config path, the value YAML (``_ValueLoader``): a scalar, or a
    flow list or mapping (``[1, 2, 4]``). A key with no path keeps its value's text, as ``pulumi config set`` does.
    Raises SetError."""
    key_text, value_text = split_setting(text)
    key, path = parse_path(key_text)
    try:
        value = yaml.load(value_text, Loader=_ValueLoader)
    except yaml.YAMLError as e:
        raise SetError(f"--set {shorten(text, 120)}: the value is not YAML ({shorten(' '.join(str(e).split()), 120)})"
                       ) from None
    except RecursionError:
        raise SetError(f"--set {shorten(text, 120)}: lists and maps nested more than {MAX_VALUE_DEPTH} deep; "
                       f"{VALUE_RULE}") from None
    except (ValueError, TypeError, OverflowError) as e:  # a tag's constructor: !!int abc, a 5,000-digit number
        raise SetError(f"--set {shorten(text, 120)}: the value cannot be read ({shorten(str(e), 80)}); "
                       f"{VALUE_RULE}") from None
    if (problem := value_problem(value)) is not None:
        raise SetError(f"--set {shorten(text, 120)}: {problem}; {VALUE_RULE}")
    if not path and not isinstance(value, (list, dict)):
        value = value_text
    return Setting(text=text, key=key, path=path, value=value)
