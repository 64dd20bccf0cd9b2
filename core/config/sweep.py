"""Sweeps: one experiment in the stack file that lists values becomes one experiment per value.

``nodes: [1, 2, 4]`` gives ``<name>-n1``, ``<name>-n2``, ``<name>-n4``; ``batch_size: [128, 256]``
gives ``<name>-b128``, ``<name>-b256``; both lists give their product, nodes first
(``<name>-n2-b256``). Everything else is copied, so each expanded experiment is validated, planned
and run like any other. This is the one place sweeps are expanded: ``core.config.experiment_shape`` calls ``expand``
on the raw ``experiments`` list before it reads any experiment, and the meaning rules
(``program.validation``) see only single values, keyed by the stack file's index
(``StackConfig.experiment_key``).

An elastic range (``nodes: "1:4"``) stays one experiment; a list of ranges is refused: a scaling
sweep compares fixed sizes, and an elastic run's size is whatever it got. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Mapping

from core.config.fields import problem, show

# The keys a sweep may list, and the letter of each in the expanded names.
SWEEP_KEYS = {"nodes": "n", "batch_size": "b"}
MAX_VALUES = 16  # values in one list
MAX_EXPANDED = 64  # experiments one stack-file entry may become
MAX_NAME = 32  # core.config.model.NAME: 1-32 characters (a part of Job and Service names)
# A stack's experiments, sweeps expanded, and its runs (experiments x their repeats). The offline plan (and `pulumi up`)
# registers about 7 resources a run, in time linear in the runs (workloads/experiment_suite_component.py): on a 2-core
# machine a sequential sweep plans 128 runs in about 10 s and 1,024 in about 66 s (bench/benchmarks/plan_sweep.py,
# BENCHMARKS.md). It stays at 1,024: the plan's time and memory (about 1 GB) grow on with the runs, and 1,024 runs
# at the default 120-minute timeout are twelve weeks of one cluster.
MAX_EXPERIMENTS = 1024
MAX_RUNS = 1024
NODES_RULE = 'a sweep lists fixed node counts (whole numbers >= 1); an elastic "min:max" range cannot be swept'


@dataclass(frozen=True)
class Expanded:
    """One experiment as the shape check will read it: ``item`` with single values, and ``source``,
    the index of its entry in the stack file's ``experiments`` list (the key its problems name)."""
    source: int
    item: Any
    sweep: str | None = None  # the stack file's name of the entry it was expanded from; None: not a sweep


def _value(key: str, v: Any, batch_max: int) -> tuple[int | None, str]:
    """(the value as a whole number, "") or (None, the rule it breaks)."""
    if isinstance(v, str) and re.fullmatch(r"\d+", v):
        v = int(v)
    if key == "nodes":
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            return v, ""
        return None, NODES_RULE
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= batch_max:
        return v, ""
    return None, f"a sweep lists per-GPU batch sizes, whole numbers from 1 to {batch_max}"


def _values(key: str, values: list, where: str, problems: list[str], batch_max: int) -> list[int] | None:
    example = "[1, 2, 4]" if key == "nodes" else "[128, 256]"
    if not values:
        problems.append(problem(where, values, "a sweep must list at least one value", example))
        return None
    if len(values) > MAX_VALUES:
        problems.append(problem(where, values, f"a sweep lists at most {MAX_VALUES} values", example))
        return None
    out: list[int] = []
    for j, v in enumerate(values):
        got, rule = _value(key, v, batch_max)
        if got is None:
            problems.append(problem(f"{where}[{j}]", v, rule, example))
        elif got in out:
            problems.append(problem(f"{where}[{j}]", v, "is listed twice; each value of a sweep once", example))
        else:
            out.append(got)
    return out if len(out) == len(values) else None


def _experiments_of(item: Any) -> int:
    """How many experiments one entry makes: the product of its sweep lists' lengths, 1 without a list."""
    made = 1
    for key in SWEEP_KEYS:
        value = item.get(key) if isinstance(item, Mapping) else None
        made *= len(value) if isinstance(value, list) else 1
    return made


def _repeats_of(item: Any, limit: int) -> int:
    """An entry's ``repeats`` where it is a whole number from 1 to ``limit`` (or its digits, as the shape check reads
    them); else 1 (the shape check refuses it)."""
    value = item.get("repeats") if isinstance(item, Mapping) else None
    if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()):
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= limit else 1


def too_many(raw: list, *, max_repeats: int) -> str:
    """The one problem when the ``experiments`` list makes more than MAX_EXPERIMENTS experiments or MAX_RUNS runs;
    "" otherwise. Counted by arithmetic on the lists' lengths, before anything is expanded, so a small file that
    would expand to millions costs no more to refuse than to read."""
    experiments = sum(_experiments_of(item) for item in raw)
    runs = sum(_experiments_of(item) * _repeats_of(item, max_repeats) for item in raw)
    if experiments > MAX_EXPERIMENTS:
        return (f"experiments: its {len(raw)} entries make {experiments} experiments once their sweeps are expanded; "
                f"a stack holds at most {MAX_EXPERIMENTS}: split them over several stacks (one Pulumi.<stack>.yaml "
                f"each)")
    if runs > MAX_RUNS:
        return (f"experiments: its {experiments} experiments with their repeats make {runs} runs; a stack runs at "
                f"most {MAX_RUNS}: lower repeats, or split the experiments over several stacks")
    return ""


def expand(raw: list, problems: list[str], *, batch_max: int) -> list[Expanded]:
    """Every entry of the raw ``experiments`` list, sweeps expanded. Problems of the lists themselves
    (bad values, too many, a generated name too long or taken) are appended to ``problems``; an entry
    with a bad list is passed on with the list removed, so its other keys are still checked once."""
    out: list[Expanded] = []
    for i, item in enumerate(raw):
        lists = {k: item[k] for k in SWEEP_KEYS if isinstance(item, Mapping) and isinstance(item.get(k), list)}
        if not lists:
            out.append(Expanded(i, item))
            continue
        single = {k: v for k, v in item.items() if k not in lists}
        checked = {k: _values(k, v, f"experiments[{i}].{k}", problems, batch_max) for k, v in lists.items()}
        name = item.get("name")
        if any(v is None for v in checked.values()) or not isinstance(name, str):
            out.append(Expanded(i, single))  # the Reader reports a missing or bad name
            continue
        combos = list(itertools.product(*checked.values()))
        if len(combos) > MAX_EXPANDED:
            problems.append(problem(f"experiments[{i}]", {k: lists[k] for k in lists},
                                    f"the sweep makes {len(combos)} experiments; at most {MAX_EXPANDED}",
                                    '{"nodes": [1, 2, 4, 8]}'))
            out.append(Expanded(i, single))
            continue
        for combo in combos:
            suffix = "".join(f"-{SWEEP_KEYS[k]}{v}" for k, v in zip(checked, combo))
            out.append(Expanded(i, {**single, **dict(zip(checked, combo)), "name": name + suffix}, sweep=name))
        longest = name + "".join(f"-{SWEEP_KEYS[k]}{max(v)}" for k, v in checked.items())
        if len(longest) > MAX_NAME:
            problems.append(problem(f"experiments[{i}].name", name, f"the sweep names its experiments "
                                    f"<name>{''.join(f'-{SWEEP_KEYS[k]}<{k}>' for k in checked)} (e.g. {longest!r}, "
                                    f"{len(longest)} characters), and a name has at most {MAX_NAME}: shorten it",
                                    show(name[:MAX_NAME - len(longest) + len(name)] or "rn50")))
    problems.extend(collisions(out))
    return out


def collisions(expanded: list[Expanded]) -> list[str]:
    """A name a sweep generates that another entry (or another sweep) also has: both named."""
    out, first = [], {}
    for e in expanded:
        name = e.item.get("name") if isinstance(e.item, Mapping) else None
        if not isinstance(name, str):
            continue
        if name in first and (e.sweep or first[name].sweep):
            other = first[name]
            what = lambda x: (f'experiments[{x.source}] (the sweep of "{x.sweep}")' if x.sweep  # noqa: E731
                              else f"experiments[{x.source}]")
            out.append(problem(f"experiments[{e.source}].name", e.sweep or name,
                               f'makes the experiment "{name}", and so does {what(other)}: names must be unique; '
                               f"rename one", show(f"{name}-2")))
        first.setdefault(name, e)
    return out
