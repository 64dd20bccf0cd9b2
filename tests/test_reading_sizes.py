"""Functions and files a reader can hold: no function over ``MAX_FUNCTION_LINES``, no file over ``MAX_FILE_LINES``.

Counted over the project's code (tests aside): a function from its ``def`` line to its last line, docstring
included; a file, every line. A piece that must stay whole says why where a reader meets it: a comment
``# One piece: <why>`` on the line right above the function (above its decorators), or a line ``One piece:
<why>`` in the file's docstring (a generated table, for example).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_graph import ROOT, python_files

MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 400
NOTE = "One piece:"


def code_files(root: Path) -> list[Path]:
    return [p for p in python_files(root) if p.relative_to(root).parts[0] != "tests"]


def long_pieces(root: Path) -> list[str]:
    """``path: N lines`` for each file over the limit and ``path:line name: N lines`` for each function over it,
    unless it carries its note."""
    found = []
    for path in code_files(root):
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        name = path.relative_to(root).as_posix()
        if len(lines) > MAX_FILE_LINES and NOTE not in (ast.get_docstring(tree) or ""):
            found.append(f"{name}: {len(lines)} lines")
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = node.end_lineno - node.lineno + 1
            top = min([node.lineno] + [d.lineno for d in node.decorator_list])
            noted = top >= 2 and lines[top - 2].strip().startswith(f"# {NOTE}")
            if size > MAX_FUNCTION_LINES and not noted:
                found.append(f"{name}:{node.lineno} {node.name}: {size} lines")
    return found


def test_no_function_or_file_is_longer_than_a_reader_can_hold():
    found = long_pieces(ROOT)
    assert not found, (f"over {MAX_FUNCTION_LINES} lines a function, over {MAX_FILE_LINES} a file: split it into "
                       f"named steps, or say why it is one piece ({NOTE!r}):\n" + "\n".join(found))


def test_the_size_check_finds_long_pieces_and_honours_their_notes(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n")
    (tmp_path / "noted.py").write_text(f"# {NOTE} a table\n@staticmethod\ndef g():\n{body}\n")
    (tmp_path / "big.py").write_text("\n" * MAX_FILE_LINES + "x = 1\n")
    (tmp_path / "table.py").write_text(f'"""Prices.\n\n{NOTE} generated.\n"""\n' + "\n" * MAX_FILE_LINES)
    assert sorted(long_pieces(tmp_path)) == ["big.py: 401 lines", f"long.py:1 f: {MAX_FUNCTION_LINES + 1} lines"]
