"""Imports point down the layers, in the code and in the tests that mirror it.

The layers, bottom first: ``core`` <- ``infra`` <- ``workloads``, ``datasets`` <- ``program`` <- ``bench``
(``__main__.py`` is the program's entry, at the program's level). A module may import its own package and
any lower layer, never a higher one nor a sibling of its own level (workloads and datasets do not import
each other). Imports inside functions count (the walk of tests/test_import_graph.py).

Tests sit beside the layer they test: ``tests/<layer>/`` imports only what that layer may import, plus the
layer itself, and the tests of lower layers (their fixtures and examples). ``tests/pods`` runs the Jobs of
the program's plan, at the program's level; ``tests/lifecycle`` runs ``bench run`` end to end, at bench's.
``tests/support`` serves every layer's tests; it may import the project's lower layers freely and, above
them, only what ``SUPPORT_NEEDS`` names and says why.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_import_graph import ROOT, import_graph

RANK = {"core": 0, "infra": 1, "workloads": 2, "datasets": 2, "program": 3, "bench": 4}
# The code layer each tests/ folder mirrors.
TESTS_MIRROR = {"core": "core", "infra": "infra", "workloads": "workloads", "datasets": "datasets",
                "program": "program", "pods": "program", "bench": "bench", "lifecycle": "bench"}
# What tests/support imports from program/ and bench/, the top two layers, and why.
SUPPORT_NEEDS = {
    "program.mocks": "the one mock engine (mock_engine.py): component tests of infra and workloads run under it",
    "bench.proc": "killing a process tree at once (processes.py), for the trainer's and the local runner's tests",
    "bench.local_etcd": "the loopback etcd (processes.py, sandbox_cluster.py) the trainer's rendezvous uses",
    "bench.local_plan": "the local run's node range (sandbox_cluster.py), so the sandbox plans what --local runs",
}
SUPPORT_MAY_REACH = 2  # below program: core, infra, workloads, datasets


def layer_of(module: str) -> str | None:
    """The layer a module belongs to: its package, or for ``tests.<folder>.x`` the layer the folder mirrors;
    None for modules outside the layers (tests/support, tests/ itself)."""
    parts = module.split(".")
    if parts[0] == "__main__":
        return "program"  # what pulumi up runs: the program's entry
    if parts[0] != "tests":
        return parts[0] if parts[0] in RANK else None
    return TESTS_MIRROR.get(parts[1]) if len(parts) > 2 or (len(parts) == 2 and parts[1] in TESTS_MIRROR) else None


def may_import(importer: str, imported: str) -> bool:
    own, other = layer_of(importer), layer_of(imported)
    return own is None or other is None or own == other or RANK[other] < RANK[own]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported (layer over layer)`` for every import against the layers, and every import of
    tests/support above ``SUPPORT_MAY_REACH`` that ``SUPPORT_NEEDS`` does not name."""
    found = []
    for importer in sorted(graph):
        for imported in sorted(graph[importer]):
            if importer.startswith("tests.support."):
                other = layer_of(imported)
                if other and RANK[other] > SUPPORT_MAY_REACH and imported not in SUPPORT_NEEDS and imported != other:
                    found.append(f"{importer} -> {imported} (tests/support needs it? name it in SUPPORT_NEEDS)")
            elif not may_import(importer, imported):
                found.append(f"{importer} -> {imported} ({layer_of(imported)} is not below {layer_of(importer)})")
    return found


def test_imports_point_down_the_layers_in_code_and_tests():
    graph = import_graph(ROOT)
    assert "tests.program.test_program" in graph and "program.offline" in graph  # the walk found both halves
    found = upward_imports(graph)
    assert not found, "imports against the layers (imports inside functions count):\n" + "\n".join(found)


def test_support_needs_are_still_needed():
    graph = import_graph(ROOT)
    used = set().union(*(graph[m] for m in graph if m.startswith("tests.support.")))
    assert set(SUPPORT_NEEDS) <= used, f"no longer imported by tests/support: {set(SUPPORT_NEEDS) - used}"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_check_finds_a_test_importing_above_its_layer_and_a_sibling_import(tmp_path):
    write(tmp_path, {
        "core/__init__.py": "", "core/a.py": "",
        "infra/__init__.py": "", "infra/b.py": "from core import a\n",
        "workloads/__init__.py": "", "workloads/w.py": "def f():\n    from datasets import d\n",
        "datasets/__init__.py": "", "datasets/d.py": "",
        "program/__init__.py": "", "program/mocks.py": "", "program/offline.py": "",
        "bench/__init__.py": "", "bench/plan.py": "from program.offline import x\n", "bench/proc.py": "",
        "tests/__init__.py": "",
        "tests/infra/__init__.py": "",
        "tests/infra/test_b.py": "from infra.b import c\nfrom tests.core.test_a import GOOD\n",
        "tests/infra/test_plan.py": "def test():\n    from bench.plan import evaluate\n",
        "tests/core/__init__.py": "", "tests/core/test_a.py": "from tests.program.test_p import P5\n",
        "tests/program/__init__.py": "", "tests/program/test_p.py": "from program.offline import evaluate\n",
        "tests/pods/__init__.py": "", "tests/pods/conftest.py": "from tests.program.test_p import P5\n",
        "tests/support/__init__.py": "",
        "tests/support/ok.py": "from program.mocks import M\nfrom bench.proc import descendants\n",
        "tests/support/bad.py": "from bench.plan import evaluate\n",
    })
    assert upward_imports(import_graph(tmp_path)) == [
        "tests.core.test_a -> tests.program.test_p (program is not below core)",
        "tests.infra.test_plan -> bench.plan (bench is not below infra)",
        "tests.support.bad -> bench.plan (tests/support needs it? name it in SUPPORT_NEEDS)",
        "workloads.w -> datasets (datasets is not below workloads)",
        "workloads.w -> datasets.d (datasets is not below workloads)",
    ]
