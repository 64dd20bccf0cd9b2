"""The configuration reference (``docs/CONFIGURATION.md``) is held to the parser: each table's keys are the keys
``core.config.shape`` allows in that place (asked by planting an unknown key there and reading the allowed ones from
its message), and every choice an experiment field allows is listed beside it."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from core.config.fields import ConfigError
from core.config.model import Experiment
from core.config.shape import parse_stack_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFIGURATION.md"
PLANTED = "zz_planted"
# Where each table's keys live in a stack file: a planted unknown key there makes the parser list the allowed ones.
PLACES = {
    "The top level": {PLANTED: 1},
    "network": {"network": {PLANTED: 1}},
    "network.existing": {"network": {"existing": {PLANTED: 1}}},
    "cluster": {"cluster": {PLANTED: 1}},
    "gpu_node_groups": {"gpu_node_groups": [{PLANTED: 1}]},
    "system_nodes": {"system_nodes": {PLANTED: 1}},
    "storage": {"storage": {PLANTED: 1}},
    "storage.efs": {"storage": {"efs": {PLANTED: 1}}},
    "storage.fsx": {"storage": {"kind": "fsx", "fsx": {PLANTED: 1}}},
    "results": {"results": {PLANTED: 1}},
    "experiments": {"experiments": [{"name": "a", PLANTED: 1}]},
    "autostop": {"autostop": {PLANTED: 1}},
    "local": {"local": {PLANTED: 1}},
}


def tables() -> dict[str, list[str]]:
    """Each ``### `place` ...`` heading's table rows."""
    out: dict[str, list[str]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            m = re.match(r"### (?:`([\w.]+)`|(The top level))", line)
            current = (m.group(1) or m.group(2)) if m else None
            if current:
                out[current] = []
        elif current and line.startswith("| `"):
            out[current].append(line)
    return out


def documented_keys(rows: list[str]) -> set[str]:
    return {k for row in rows for k in re.findall(r"`(\w+)`", row.split(" | ")[0])}


def allowed_keys(raw: dict) -> set[str]:
    with pytest.raises(ConfigError) as e:
        parse_stack_config(raw, project="eksbench", stack="s", region="us-west-2")
    [message] = [p for p in e.value.problems if PLANTED in p]
    return set(message.split("allowed keys here:")[1].replace(" ", "").split(","))


@pytest.mark.parametrize("place", PLACES)
def test_each_table_lists_exactly_the_keys_the_parser_allows_there(place):
    found = tables()
    assert place in found, f"docs/CONFIGURATION.md has no table for {place}"
    documented, allowed = documented_keys(found[place]), allowed_keys(PLACES[place])
    assert documented == allowed, (f"{place}: documented but not allowed {sorted(documented - allowed)}; "
                                   f"allowed but not documented {sorted(allowed - documented)}")


def test_every_experiment_choice_is_listed_beside_its_key():
    rows = {re.match(r"\| `(\w+)`", row).group(1): row for row in tables()["experiments"]}
    for f in fields(Experiment):
        choices = f.metadata.get("choices")
        if not choices:
            continue
        listed = rows[f.name].split(" | ")[1]
        assert set(re.findall(r"`([\w-]+)`", listed.split("(")[0])) == set(choices), (f.name, listed, choices)


def test_a_key_the_parser_does_not_know_would_be_caught():
    """The check can fail: a table row for a key that does not exist is reported."""
    rows = tables()["autostop"] + ["| `idle_mintues` | 1..1440 (5) | a typo |"]
    assert documented_keys(rows) != allowed_keys(PLACES["autostop"])
