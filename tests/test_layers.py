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

Inside a layer, the rooms (docs/ARCHITECTURE.md): ``ROOMS`` says, for each package with rooms, what each
room may import of its siblings. A module directly in such a package belongs to the room ``TOP`` names
for it. Rooms govern the code; the tests of a room sit in the mirrored folder and obey the layers above.
Two more rules: no package holds more than ``MAX_MODULES`` modules directly, and the launcher's harness
never imports a framework (``FRAMEWORKS``).
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
    "program.mock_run": "running a program under that engine (mock_engine.py), as the offline plan does",
    "bench.proc": "killing a process tree at once (processes.py), for the trainer's and the local runner's tests",
    "bench.local.etcd": "the loopback etcd (processes.py, sandbox_cluster.py) the trainer's rendezvous uses",
    "bench.local.plan": "the local run's node range (sandbox_cluster.py), so the sandbox plans what --local runs",
}
SUPPORT_MAY_REACH = 2  # below program: core, infra, workloads, datasets

# Per package with rooms: each room and the sibling rooms it may import (its own room always).
ROOMS: dict[str, dict[str, set[str]]] = {
    "core": {"catalog": set(), "contract": {"catalog"}, "config": {"catalog", "contract"}},
    "infra": {"base": set(), "access": {"base"}, "network": {"base", "access"},
              "cluster": {"base", "access"}, "storage": {"base", "access", "cluster"},
              "addons": {"base", "access", "cluster"}},
    "workloads": {"train": set(), "names": set(), "launch": {"train", "names"}, "top": {"train", "launch", "names"}},
    "workloads.train": {"common": set(), "control": set(), "harness": {"common"},
                        "pytorch": {"common", "harness"}, "tensorflow": {"common"}, "paddle": {"common"},
                        "horovod": {"common", "harness", "pytorch"}},
    "bench": {"base": set(), "results": {"base"}, "lifecycle": {"base"},
              "local": {"base", "results", "lifecycle"}, "cloud": {"base", "results", "lifecycle"},
              "report": {"base", "results"}, "prices": {"base"},
              "automation": {"base", "results", "lifecycle", "local", "cloud"},
              "commands": {"base", "results", "lifecycle", "local", "cloud", "report", "prices", "automation"},
              "cli": {"base", "commands"},
              "benchmarks": {"base", "results", "lifecycle", "local", "cloud", "report", "prices", "automation",
                             "commands"}},
}
# The room of a module directly in a package with rooms ("*": every other module there).
TOP = {
    "infra": {"component_options": "base", "k8s_objects": "base", "labels": "base", "environment": "base",
              "container_text": "base"},
    "workloads": {"object_names": "names", "*": "top"},
    "bench": {"proc": "base", "progress": "base", "project": "base", "errors": "base", "terminal": "base",
              "version": "base", "lifecycle": "lifecycle",
              "automation": "automation", "cli": "cli", "__main__": "cli"},
}
MAX_MODULES = 20
HARNESS = "workloads.train.harness"
FRAMEWORKS = {"torch", "torchvision", "tensorflow", "keras", "paddle", "horovod", "numpy"}


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


def room_of(package: str, module: str) -> str | None:
    """The room of ``module`` (inside ``package``): its subpackage, or for a module directly in the package
    what ``TOP`` says; None for the package itself."""
    rest = module[len(package) + 1:].split(".") if module.startswith(package + ".") else []
    if not rest:
        return None
    if len(rest) > 1 or rest[0] in ROOMS[package]:
        return rest[0]
    top = TOP.get(package, {})
    return top.get(rest[0], top.get("*", rest[0]))


def room_crossings(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import between two rooms of one package that ``ROOMS`` does not allow."""
    found = []
    for importer in sorted(graph):
        for imported in sorted(graph[importer]):
            shared = [p for p in ROOMS if importer.startswith(p + ".") and imported.startswith(p + ".")]
            if not shared:
                continue
            package = max(shared, key=len)  # the innermost package holding both
            own, other = room_of(package, importer), room_of(package, imported)
            if own is None or other is None or own == other:
                continue
            if other not in ROOMS[package].get(own, set()):
                found.append(f"{importer} -> {imported} ({package}: {own} may not import {other})")
    return found


def framework_imports(root: Path, package: str = HARNESS) -> list[str]:
    """``module: name`` for every framework a module of ``package`` imports, anywhere in it."""
    import ast

    from tests.test_import_graph import project_modules

    found = []
    for module, path in sorted(project_modules(root).items()):
        if module != package and not module.startswith(package + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            found += [f"{module}: {n}" for n in names if n.split(".")[0] in FRAMEWORKS]
    return found


def crowded_packages(root: Path) -> list[str]:
    """Packages (code or tests) holding more than ``MAX_MODULES`` modules directly, ``__init__`` aside."""
    from tests.test_import_graph import python_files

    count: dict[str, int] = {}
    for path in python_files(root):
        if path.name != "__init__.py" and (path.parent / "__init__.py").exists():
            folder = path.parent.relative_to(root).as_posix()
            count[folder] = count.get(folder, 0) + 1
    return [f"{folder}: {n} modules" for folder, n in sorted(count.items()) if n > MAX_MODULES]


def test_imports_between_rooms_go_where_the_rooms_allow():
    graph = import_graph(ROOT)
    assert "bench.commands.run" in graph and "workloads.train.harness.launch" in graph
    found = room_crossings(graph)
    assert not found, "imports between rooms that ROOMS does not allow (docs/ARCHITECTURE.md):\n" + "\n".join(found)


def test_the_harness_never_imports_a_framework():
    found = framework_imports(ROOT)
    assert not found, "the launcher's harness imports a framework:\n" + "\n".join(found)


def test_no_package_holds_more_than_twenty_modules():
    assert not crowded_packages(ROOT), crowded_packages(ROOT)


def test_no_top_level_folder_is_named_spec():
    assert not (ROOT / "spec").exists()


def test_the_room_checks_find_planted_imports(tmp_path):
    """Each planted import runs against its package's rooms; the allowed ones are not reported."""
    files = {
        "core/__init__.py": "", "core/catalog/__init__.py": "", "core/contract/__init__.py": "",
        "core/config/__init__.py": "",
        "core/catalog/aws.py": "def f():\n    from core.config import model\n",  # up: catalog -> config
        "core/config/model.py": "from core.catalog import aws\nfrom core.contract import names\n",  # allowed
        "core/contract/names.py": "",
        "workloads/__init__.py": "", "workloads/job_manifests.py": "from workloads.train.harness import launch\n",
        "workloads/object_names.py": "from workloads import job_manifests\n",  # names -> top
        "workloads/launch/__init__.py": "",
        "workloads/launch/pytorch.py": "from workloads import object_names\nfrom workloads import job_manifests\n",
        "workloads/train/__init__.py": "", "workloads/train/harness/__init__.py": "",
        "workloads/train/pytorch/__init__.py": "", "workloads/train/common/__init__.py": "",
        "workloads/train/harness/launch.py": "from workloads.train.pytorch import trainer\nimport torch\n",
        "workloads/train/pytorch/trainer.py": "from workloads.train.common import data\n",
        "workloads/train/common/data.py": "from workloads import job_manifests\n",  # train -> workloads' top
        "infra/__init__.py": "", "infra/labels.py": "", "infra/access/__init__.py": "",
        "infra/cluster/__init__.py": "", "infra/access/policies.py": "from infra.cluster import eks\n",
        "infra/cluster/eks.py": "from infra import labels\nfrom infra.access import policies\n",
        "bench/__init__.py": "", "bench/terminal.py": "", "bench/results/__init__.py": "",
        "bench/commands/__init__.py": "", "bench/local/__init__.py": "", "bench/cloud/__init__.py": "",
        "bench/results/frames.py": "from bench.commands import run\nfrom bench import terminal\n",
        "bench/commands/run.py": "from bench.local import backend\n",
        "bench/local/backend.py": "from bench.cloud import backend\n",  # siblings
        "bench/cloud/backend.py": "",
    }
    write(tmp_path, files)
    assert room_crossings(import_graph(tmp_path)) == [
        "bench.local.backend -> bench.cloud (bench: local may not import cloud)",
        "bench.local.backend -> bench.cloud.backend (bench: local may not import cloud)",
        "bench.results.frames -> bench.commands (bench: results may not import commands)",
        "bench.results.frames -> bench.commands.run (bench: results may not import commands)",
        "core.catalog.aws -> core.config (core: catalog may not import config)",
        "core.catalog.aws -> core.config.model (core: catalog may not import config)",
        "infra.access.policies -> infra.cluster (infra: access may not import cluster)",
        "infra.access.policies -> infra.cluster.eks (infra: access may not import cluster)",
        "workloads.launch.pytorch -> workloads.job_manifests (workloads: launch may not import top)",
        "workloads.object_names -> workloads.job_manifests (workloads: names may not import top)",
        "workloads.train.common.data -> workloads.job_manifests (workloads: train may not import top)",
        "workloads.train.harness.launch -> workloads.train.pytorch (workloads.train: harness may not import pytorch)",
        "workloads.train.harness.launch -> workloads.train.pytorch.trainer "
        "(workloads.train: harness may not import pytorch)",
    ]
    assert framework_imports(tmp_path) == ["workloads.train.harness.launch: torch"]
    write(tmp_path, {f"bench/local/m{i}.py": "" for i in range(MAX_MODULES)})
    assert crowded_packages(tmp_path) == [f"bench/local: {MAX_MODULES + 1} modules"]


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
        "bench/__init__.py": "", "bench/commands/plan.py": "from program.offline import x\n", "bench/proc.py": "",
        "tests/__init__.py": "",
        "tests/infra/__init__.py": "",
        "tests/infra/test_b.py": "from infra.b import c\nfrom tests.core.test_a import GOOD\n",
        "tests/infra/test_plan.py": "def test():\n    from bench.commands.plan import evaluate\n",
        "tests/core/__init__.py": "", "tests/core/test_a.py": "from tests.program.test_p import P5\n",
        "tests/program/__init__.py": "", "tests/program/test_p.py": "from program.offline import evaluate\n",
        "tests/pods/__init__.py": "", "tests/pods/conftest.py": "from tests.program.test_p import P5\n",
        "tests/support/__init__.py": "",
        "tests/support/ok.py": "from program.mocks import M\nfrom bench.proc import descendants\n",
        "tests/support/bad.py": "from bench.commands.plan import evaluate\n",
    })
    assert upward_imports(import_graph(tmp_path)) == [
        "tests.core.test_a -> tests.program.test_p (program is not below core)",
        "tests.infra.test_plan -> bench.commands.plan (bench is not below infra)",
        "tests.support.bad -> bench.commands.plan (tests/support needs it? name it in SUPPORT_NEEDS)",
        "workloads.w -> datasets (datasets is not below workloads)",
        "workloads.w -> datasets.d (datasets is not below workloads)",
    ]
