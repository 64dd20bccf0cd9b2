"""One home per name two processes share: the file names, env var names, label keys and the default region
are spelled once in the code (``core/contract/names.py``, ``core/catalog/aws.py``), and imported everywhere else.

The scan reads every string literal of the project's code outside tests (f-string pieces included,
docstrings and comments not): prose may name a file, code may not spell it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.catalog import aws
from core.contract import names
from tests.test_import_graph import ROOT, python_files

HOMES = {"core/contract/names.py", "core/catalog/aws.py"}
CATALOG = "core/catalog/"  # its tables list regions (us-west-2 among them); the default is aws.DEFAULT_REGION
# Spelled as a whole literal or a path component ("*/summary.json", "metrics/rank-0.jsonl").
PATH_NAMES = (names.SUMMARY_FILE, names.PROGRESS_FILE, names.EVAL_FILE, names.TIMELINE_FILE, names.CHECKPOINT_DIR,
              names.ALLREDUCE_LINES_FILE, names.node_name(""), names.repeat_suffix(""), aws.DEFAULT_REGION)
# Spelled anywhere inside a literal: label keys and env var names are never prose in code.
INSIDE = (names.EXPERIMENT_LABEL, names.RUN_ID_LABEL, names.REPEAT_LABEL, names.PEERS_LABEL)
ENV = re.compile(r"\bEKSBENCH_[A-Z0-9_]+\b")


def docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def spellings(root: Path) -> list[str]:
    """``path:line: literal`` for each second spelling outside the homes and the tests."""
    found = []
    for path in python_files(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("tests/") or rel in HOMES:
            continue
        tree = ast.parse(path.read_text(), rel)
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
                continue
            text = node.value
            parts = [p.lstrip("*") for p in text.split("/")]
            hits = [n for n in PATH_NAMES if n in parts and not (n == aws.DEFAULT_REGION and rel.startswith(CATALOG))] + [n for n in INSIDE if n in text] + ENV.findall(text)
            found += [(rel, node.lineno, node.col_offset, f"{rel}:{node.lineno}: {hit!r}") for hit in hits]
    return [line for *_, line in sorted(found)]


def test_each_shared_name_is_spelled_once_in_the_code():
    found = spellings(ROOT)
    assert not found, ("spelled outside core/contract/names.py (import the name from there):\n" + "\n".join(found))


def test_the_homes_hold_each_name():
    text = (ROOT / "core/contract/names.py").read_text()
    for name in (*PATH_NAMES[:-1], *INSIDE):
        assert f'"{name}' in text or f"{name}{{" in text or name in text, name
    assert f'DEFAULT_REGION = "{aws.DEFAULT_REGION}"' in (ROOT / "core/catalog/aws.py").read_text()


def test_the_scan_finds_a_second_spelling(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "x.py").write_text(
        '"""Reads summary.json (prose is fine)."""\n'
        'A = "summary.json"\n'
        'B = f"{root}/logs/{node}.log" + f"node-{i}"\n'
        'C = {"eksbench.io/run-id": 1}\n'
        'D = f"a=1,eksbench.io/repeat={k}"\n'
        'E = environ.get("EKSBENCH_GATE")\n'
        'F = "us-west-2"\n'
        'G = "e.g. us-west-2a"\n')
    assert [line.split(": ", 1)[1] for line in spellings(tmp_path)] == [
        "'summary.json'", "'node-'", "'eksbench.io/run-id'", "'eksbench.io/repeat'", "'EKSBENCH_GATE'", "'us-west-2'"]
