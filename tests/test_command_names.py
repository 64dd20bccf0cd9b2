"""The command is ``eksbench``: no file a user reads names it ``bench`` or ``python -m bench`` any more.

The Python package is still ``bench`` (``from bench import automation`` is right), so only a command position counts:
``bench`` followed by one of the CLI's commands, and ``python -m bench`` (not ``python -m bench.benchmarks...``).
BENCHMARKS.md is left out: it records each command as it was run."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

import nbformat
import pytest

from bench.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def command_names() -> list[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


OLD = re.compile(r"(?<![\w./-])bench\s+(?:%s)\b|python3?\s+-m\s+bench\b(?!\.)" % "|".join(command_names()))


def user_files() -> dict[str, str]:
    """Each file a user reads, by its path, as text: the README, docs, stack files and the notebooks' cells."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("Pulumi*.yaml")),
             *sorted((ROOT / "tests" / "stacks").glob("Pulumi*.yaml"))]
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in paths}
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(nb_path, as_version=4).cells
        texts[str(nb_path.relative_to(ROOT))] = "\n".join(c.source for c in cells)
    return texts


def help_texts(parser: argparse.ArgumentParser, name: str = "eksbench") -> dict[str, str]:
    """``eksbench <command> --help`` of every command, nested ones included."""
    texts = {f"{name} --help": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                texts.update(help_texts(sub, f"{name} {sub_name}"))
    return texts


def old_names(texts: dict[str, str]) -> list[str]:
    found = []
    for where, text in texts.items():
        for m in OLD.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{where}:{line}: {' '.join(m.group(0).split())!r}")
    return found


def test_the_pattern_finds_the_old_name_at_a_command_position_only():
    text = "run `bench plan dev`\npython -m bench run x\n`python3 -m bench` and `bench\n  data list`"
    assert old_names({"a": text}) == ["a:1: 'bench plan'", "a:2: 'python -m bench'", "a:3: 'python3 -m bench'",
                                      "a:3: 'bench data'"]
    assert old_names({"a": "eksbench plan dev; from bench import results; bench/results/x.py; tests/bench/run; "
                           "python3 -m bench.benchmarks.compare_calibration; the bench report is"}) == \
        ["a:1: 'bench report'"]  # prose that reads as a command counts too


@pytest.mark.parametrize("kind", ["files", "help"])
def test_no_user_facing_text_names_the_old_command(kind):
    texts = user_files() if kind == "files" else help_texts(build_parser())
    assert texts
    found = old_names(texts)
    assert not found, "the command is eksbench:\n" + "\n".join(found)


def test_data_list_names_the_command():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["data", "list"]) == 0
    assert "eksbench data prepare" in out.getvalue() and not old_names({"data list": out.getvalue()})
