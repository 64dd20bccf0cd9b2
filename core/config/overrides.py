"""What the command line changes in a stack's config for one run: ``--set key=value`` and ``--experiment NAME``.

A ``--set`` key is a Pulumi config path, as ``pulumi config set --path`` reads it: ``experiments[0].nodes``,
``local.steps``, ``experiments[1]["batch_size"]``, ``aws:region``; a key without a namespace is the project's
(``eksbench:``). The values are set in the config the Pulumi CLI hands the program (``apply``: scalars as
strings, objects and arrays as JSON, ``core.config.pulumi_config``), before the shape and meaning checks, so a
value set here is checked exactly as one written in the stack file, and its problems name the key and say it
came from ``--set`` (``annotate``). ``--experiment`` keeps one experiment of the checked config (``select``).

The stack file is never rewritten: ``pulumi config set`` would keep the value for every later run. The CLI
hands the program the overrides in one environment variable (``ENV_OVERRIDES``, JSON: ``to_env``), which the
Pulumi CLI passes on to the program it runs; ``__main__.py`` reads it and the offline plan applies the same
``Overrides``. Pure: no I/O, standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from core.config.fields import ConfigError, shorten
from core.config.pulumi_config import PROJECT, SECRET, to_pulumi_value

Path = tuple[str | int, ...]

# Pulumi's property paths (pulumi/sdk go/common/resource/property_path.go, ParsePropertyPath): names joined by
# ".", list indexes as [N], and any key as ["..."] with JSON's escapes.
_NAME = re.compile(r"[^.\[\]\"]+")
_BRACKET = re.compile(r"\[(?:(\d+)|\"((?:[^\"\\]|\\.)*)\")\]")
SET_EXAMPLE = "--set experiments[0].nodes=2"
# Bounds on what one --set may say. The stack file's deepest key, experiments[0].sweep.nodes[1], is 4 steps below
# its top key and its values nest 3 deep: these leave room for any key the config has, and none for a key path or a
# value that would run a reader out of stack. Whole numbers are 64-bit, as the config's largest (bytes, seconds) are.
MAX_PATH_STEPS = 16
MAX_VALUE_DEPTH = 16
MAX_WHOLE_NUMBER = 2**63 - 1
VALUE_RULE = (f"a value is a number, text, true, false or null, or a [list] or {{map}} of them (map keys text), "
              f"nested at most {MAX_VALUE_DEPTH} deep, whole numbers within +-{MAX_WHOLE_NUMBER}")


class SetError(ValueError):
    """A ``--set`` that cannot be read or applied; ``str()`` is the one line to print."""


@dataclass(frozen=True)
class Setting:
    """``text`` as typed (``experiments[0].nodes=2``); ``key`` the namespaced config key (``eksbench:experiments``);
    ``path`` the steps inside its value (``(0, "nodes")``); ``value`` the value, already parsed."""
    text: str
    key: str
    path: Path
    value: Any

    @property
    def head(self) -> str:
        """The config key as the config's problems name it: the project's namespace dropped (``experiments``)."""
        ns, _, name = self.key.partition(":")
        return name if ns == PROJECT else self.key

    @property
    def shown_key(self) -> str:
        """The key and the path inside it, as the config's problems name them (``experiments[0].nodes``)."""
        return path_text(self.head, self.path)


def path_text(head: str, path: Path) -> str:
    """``head`` then each step: ``.name``, ``[N]``, or ``["odd key"]`` (as core.config.fields.Reader.key writes it)."""
    out = head
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif re.fullmatch(r"[A-Za-z_][\w-]*", step):
            out += f".{step}"
        else:
            out += f"[{json.dumps(step)}]"
    return out


def parse_path(text: str) -> tuple[str, Path]:
    """``(namespaced key, path)`` of a Pulumi config path; SetError naming where it breaks."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m, step = None, None
        if steps and text[pos] == "[":
            if m := _BRACKET.match(text, pos):
                step = int(m[1]) if m[1] is not None else json.loads(f'"{m[2]}"')
        elif not steps or text[pos] == ".":
            if m := _NAME.match(text, pos + (1 if steps else 0)):
                step = m[0]
        if m is None:
            raise SetError(f"--set {shorten(text, 80)}=...: not a config path at character {pos + 1}; a path is "
                           'names joined by ".", list indexes as [N] and odd keys as ["key"], e.g. '
                           f"{SET_EXAMPLE}")
        steps.append(step)
        pos = m.end()
        if len(steps) > MAX_PATH_STEPS + 1:
            raise SetError(f"--set {shorten(text, 80)}=...: a key path of more than {MAX_PATH_STEPS} steps below its "
                           f"key; no config key is that deep, e.g. {SET_EXAMPLE}")
    if not steps:
        raise SetError(f"--set =...: the key is empty; give KEY=VALUE, e.g. {SET_EXAMPLE}")
    head = str(steps[0])
    return (head if ":" in head else f"{PROJECT}:{head}"), tuple(steps[1:])


_TAGS = {"bytes": "!!binary", "set": "!!set", "date": "!!timestamp", "datetime": "!!timestamp",
         "tuple": "!!omap or !!pairs"}


def value_problem(value: Any) -> str | None:
    """What keeps ``value`` from being one a stack file can hold and JSON can carry (``VALUE_RULE``); None if
    nothing. Walks the value without recursion, so no depth of nesting can run it out of stack."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()  # depth: the lists and maps around ``item``
        if isinstance(item, (list, dict)) and depth >= MAX_VALUE_DEPTH:
            return f"lists and maps nested more than {MAX_VALUE_DEPTH} deep"
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_WHOLE_NUMBER:
                return f"a whole number beyond +-{MAX_WHOLE_NUMBER} ({len(str(abs(item)))} digits)"  # YAML: < 4300
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"a number too large or not a number ({item}), which JSON cannot carry"
        elif isinstance(item, list):
            todo += [(x, depth + 1) for x in item]
        elif isinstance(item, dict):
            if (odd := next((k for k in item if not isinstance(k, str)), "")) != "":
                return (f"a map key read as {type(odd).__name__} {shorten(repr(odd), 40)} (YAML 1.1 reads on, yes, "
                        "off, no and numbers so), not text: quote it")
            todo += [(x, depth + 1) for x in item.values()]
        else:
            tag = _TAGS.get(type(item).__name__, f"a {type(item).__name__}")
            return f"{tag}, which JSON cannot carry"
    return None


def split_setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` split at the first ``=``; SetError for text without one."""
    key, sep, value = text.partition("=")
    if not sep:
        raise SetError(f"--set {shorten(text, 80)}: give KEY=VALUE, e.g. {SET_EXAMPLE}")
    return key, value


def _put(tree: Any, path: Path, value: Any, where: str) -> Any:
    """``tree`` with ``value`` at ``path``; a missing map or list on the way is made (a list where the next step
    is an index), and index len(list) appends, as ``pulumi config set --path`` does."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    here = path_text(where, (step,))
    if isinstance(step, int):
        tree = [] if tree is None else tree
        if not isinstance(tree, list):
            raise SetError(f"{where} is {_kind(tree)}, not a list: [{step}] cannot index it")
        if step > len(tree):
            raise SetError(f"{where} has {len(tree)} item(s): [{step}] is past its end ([{len(tree)}] adds one)")
        tree = list(tree)
        old = tree[step] if step < len(tree) else None
        new = _put(old, rest, value, here)
        tree[step:step + 1] = [new]
        return tree
    tree = {} if tree is None else tree
    if not isinstance(tree, dict):
        raise SetError(f"{where} is {_kind(tree)}, not a mapping: .{step} cannot be set in it")
    return {**tree, step: _put(tree.get(step), rest, value, here)}


def _kind(value: Any) -> str:
    return "a list" if isinstance(value, list) else f"the value {shorten(json.dumps(value), 60)}"


def apply_setting(pulumi_config: Mapping[str, str], s: Setting) -> dict[str, str]:
    """``pulumi_config`` (the CLI's form: each key's value a string, objects and arrays as JSON) with ``s`` set."""
    out = dict(pulumi_config)
    current = out.get(s.key)
    if s.path and current == SECRET:
        raise SetError(f"--set {s.text}: {s.head} is a secret; set it with "
                       "pulumi config set --secret")
    tree: Any = None
    if current is not None:
        try:
            tree = json.loads(current) if current[:1] in "[{" else current
        except ValueError:
            tree = current
    try:
        out[s.key] = to_pulumi_value(_put(tree, s.path, s.value, s.head))
    except SetError as e:
        raise SetError(f"--set {s.text}: {e}") from None
    return out


@dataclass(frozen=True)
class Overrides:
    """One run's ``--set`` values, in the order given, and its ``--experiment`` (None: every experiment)."""
    settings: tuple[Setting, ...] = ()
    experiment: str | None = None

    def __bool__(self) -> bool:
        return bool(self.settings) or self.experiment is not None

    def apply(self, pulumi_config: Mapping[str, str]) -> dict[str, str]:
        """The config with every setting applied in turn (a later one wins). Raises SetError."""
        out = dict(pulumi_config)
        for s in self.settings:
            out = apply_setting(out, s)
        return out

    def to_env(self) -> str:
        return json.dumps({"set": [[s.text, s.key, list(s.path), s.value] for s in self.settings],
                           "experiment": self.experiment})

    @classmethod
    def from_env(cls, text: str | None) -> Overrides:
        """What ``to_env`` wrote; none for an empty or absent variable."""
        if not text:
            return cls()
        doc = json.loads(text)
        return cls(settings=tuple(Setting(t, k, tuple(p), v) for t, k, p, v in doc.get("set") or []),
                   experiment=doc.get("experiment"))

    def annotate(self, problems: list[str]) -> list[str]:
        """Each problem whose key a ``--set`` wrote (or wrote inside) says so, naming the ``--set``."""
        out = []
        for p in problems:
            by = [s for s in self.settings if re.match(re.escape(s.shown_key) + r"(?=[=.\[:]|$)", p)]
            out.append(f"{p} (set by --set {shorten(by[-1].text, 120)})" if by else p)
        return out


def not_an_experiment(name: str, stack: str, names: list[str]) -> str:
    """The one line for an --experiment the stack does not have."""
    return (f"--experiment={json.dumps(name)}: not in stack {stack}; experiments: "
            f"{', '.join(names) or 'none'}")


def select(cfg: Any, name: str | None) -> Any:
    """``cfg`` (a StackConfig) with only the experiment named ``name`` (a sweep's names are its expanded ones:
    ``resnet50-n2``); ``cfg`` itself for None. ConfigError when the stack has no such experiment."""
    if name is None:
        return cfg
    keep = [i for i, e in enumerate(cfg.experiments) if e.name == name]
    if not keep:
        raise ConfigError([not_an_experiment(name, cfg.stack, [e.name for e in cfg.experiments])])
    sources = cfg.experiment_sources or tuple(range(len(cfg.experiments)))
    return dataclasses.replace(cfg, experiments=tuple(cfg.experiments[i] for i in keep),
                               experiment_sources=tuple(sources[i] for i in keep))
