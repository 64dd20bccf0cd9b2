"""No import cycle anywhere in the project, imports inside functions counted.

An import inside a function hides a cycle from Python (the module is complete by the time the
function runs) but not from the reader: two modules that reach into each other are one module
in two files. This walks every ``import`` and ``from ... import`` of every module of the project
(``ast``, so function bodies and ``if TYPE_CHECKING:`` blocks count too), resolves relative
names, keeps the edges between the project's own modules, and fails naming each cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".eksbench", "node_modules", "__pycache__"}
RESULTS = "results"  # where local runs land, at the top only (bench/results/ is code)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__init__"


def python_files(root: Path) -> list[Path]:
    """The project's own ``.py`` files: what git tracks or would track (never an ignored venv such as
    ``.venv-checkov``); outside a git checkout, every file but those under hidden or SKIP folders."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=root,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        return sorted(root / line for line in listed.stdout.splitlines() if (root / line).is_file())
    return sorted(p for p in root.rglob("*.py")
                  if not any(part in SKIP or part.startswith(".") for part in p.relative_to(root).parts[:-1])
                  and p.relative_to(root).parts[0] != RESULTS)


def project_modules(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in python_files(root)}


def imported_names(path: Path, module: str) -> set[str]:
    """Every module name ``path`` imports, wherever the import statement stands; ``from a import b``
    yields both ``a`` and ``a.b`` (b may be a module). Relative names are made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                head = ".".join(base + ([node.module] if node.module else []))
            else:
                head = node.module or ""
            if head:
                names.add(head)
            names.update(f"{head}.{alias.name}" if head else alias.name for alias in node.names)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {n for n in imported_names(path, name) if n in modules and n != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """The strongly connected components with more than one module (Tarjan): for each, one cycle
    through it (first module repeated at the end) and all its modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[list[str], list[str]]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append((one_cycle(graph, set(component)), sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path from the component's first module back to itself, inside the component (breadth first)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return path[::-1] + [start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(component)


def test_no_import_cycle_in_the_project():
    graph = import_graph(ROOT)
    assert "bench.automation" in graph and "core.config.model" in graph  # the walk found the project
    found = cycles(graph)
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(
        f"{' -> '.join(cycle)} (all of {', '.join(component)} reach each other)" for cycle, component in found)


def test_the_walk_sees_imports_inside_functions_and_relative_ones(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from .c import something\n")
    graph = import_graph(tmp_path)
    assert graph["pkg.a"] == {"pkg", "pkg.b"} and graph["pkg.b"] == {"pkg", "pkg.c"}
    assert graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [(["pkg.a", "pkg.b", "pkg.c", "pkg.a"], ["pkg.a", "pkg.b", "pkg.c"])]
