"""The help is written for users: every command has a one-line summary, a description and examples, every argument
says what it does, and no help text shows reStructuredText markup or the code's module names."""

from __future__ import annotations

import argparse
import re

import pytest

from bench.cli import build_parser

INTERNAL = re.compile(r"``|\b(bench|core|program|workloads|infra|datasets)\.[a-z_]+|\.py\b|imported")


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, one-line summary, parser)`` for every subcommand, nested ones (``data prepare``) included."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", summaries.get(name), sub))
                found += commands(sub, f"{prefix}{name} ")
    return found


ALL = commands(build_parser())


def test_every_command_is_listed():
    names = {name for name, _, _ in ALL}
    assert {"run", "plan", "status", "logs", "report", "compare", "audit", "up", "destroy", "data prepare"} <= names


@pytest.mark.parametrize("name,summary,parser", ALL, ids=[name for name, _, _ in ALL])
def test_each_command_has_a_summary_a_description_and_an_example(name, summary, parser):
    assert summary and "\n" not in summary and len(summary) <= 100, f"{name}: one-line summary: {summary!r}"
    if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions) or " " not in name:
        text = parser.format_help()
        assert parser.description, f"{name}: no description"
        if " " not in name:  # the top-level commands show how they are used
            assert "example" in text, f"{name}: no example"
        assert not INTERNAL.search(text), f"{name}: internal text in the help: {INTERNAL.search(text).group(0)!r}"


@pytest.mark.parametrize("name,summary,parser", ALL, ids=[name for name, _, _ in ALL])
def test_every_argument_says_what_it_does(name, summary, parser):
    silent = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
              if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help]
    assert not silent, f"{name}: arguments without help: {silent}"


def test_the_top_level_help_names_the_command_and_shows_examples():
    text = build_parser().format_help()
    assert text.startswith("usage: eksbench")
    assert "examples:" in text and "eksbench run dev --local" in text
