"""The README's experiment-keys table is held to ``core.config.model.Experiment``: every key the shape check
reads is named there, and every choice a field allows is listed beside it."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from core.config.model import Experiment

README = Path(__file__).resolve().parents[2] / "README.md"
# Fields the stack file spells differently: one "nodes" key sets both bounds ("N" or "min:max"); a
# repeat's index comes from "repeats".
STACK_KEY = {"min_nodes": "nodes", "max_nodes": "nodes", "repeat": "repeats"}


def experiments_row() -> str:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `experiments` |")]
    assert len(rows) == 1, rows
    return rows[0]


def test_every_experiment_key_is_in_the_readme_table():
    row = experiments_row()
    missing = sorted({STACK_KEY.get(f.name, f.name) for f in fields(Experiment)} - set(re.findall(r"`(\w+)`", row)))
    assert not missing, f"README experiments row lacks {missing}"


def test_every_choice_is_listed_beside_its_key():
    row = experiments_row()
    for f in fields(Experiment):
        choices = f.metadata.get("choices")
        if not choices:
            continue
        listed = re.search(rf"`{f.name}` \(([^)]*)\)", row)
        assert listed, f"README experiments row: `{f.name}` has no (a|b|...) list of its choices"
        assert set(listed.group(1).split("\\|")) == set(choices), (f.name, listed.group(1), choices)
