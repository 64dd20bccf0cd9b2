"""The names at the top of ``workloads/`` say what kind each module is, and the launch side mirrors the pods'.

- ``*_component``: a thin Pulumi component; it imports ``pulumi``. No other module of ``workloads/`` (its top,
  ``launch/``) does: the ``*_manifests`` builders and the launch builders are pure.
- ``launch/<framework>`` for each framework room of ``workloads/train/`` and each entry module the launch
  command knows (``core.contract.launch_command.ENTRY_MODULES``), and nothing else beside the shared parts.
- Autostop's four parts, in three layers, each say in their first line which part they are.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.contract.launch_command import ENTRY_MODULES
from tests.test_import_graph import imported_names

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "workloads"
LAUNCH_SHARED = {"__init__", "common", "by_framework", "pod_script"}  # launch/ modules that are no framework's
AUTOSTOP_PARTS = {
    "core/config/autostop.py": 1,  # the rule
    "workloads/autostop_manifests.py": 2,  # the Kubernetes objects
    "workloads/autostop_component.py": 3,  # the Pulumi component
    "workloads/train/control/autostop.py": 4,  # the controller in its pod
}


def imports_pulumi(path: Path) -> bool:
    return any(name.split(".")[0] == "pulumi" for name in imported_names(path, ""))


def test_only_the_component_modules_import_pulumi():
    modules = sorted(WORKLOADS.glob("*.py")) + sorted((WORKLOADS / "launch").glob("*.py"))
    components = [p.stem for p in modules if p.stem.endswith("_component")]
    assert components, "no *_component module found in workloads/"
    wrong = [f"{p.relative_to(ROOT)}: {'does not import' if p.stem.endswith('_component') else 'imports'} pulumi"
             for p in modules if imports_pulumi(p) != p.stem.endswith("_component")]
    assert not wrong, "a module's name must say whether it registers Pulumi resources:\n" + "\n".join(wrong)


def test_the_launch_side_has_one_module_per_framework_room():
    rooms = {p.parent.name for p in (WORKLOADS / "train").glob("*/__main__.py")}
    launch = {p.stem for p in (WORKLOADS / "launch").glob("*.py")} - LAUNCH_SHARED
    assert rooms == launch == set(ENTRY_MODULES), (rooms, launch, set(ENTRY_MODULES))


def autostop_modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for folder in ("core", "workloads")
            for p in (ROOT / folder).rglob("*autostop*.py")}


def test_each_autostop_module_says_which_of_the_four_parts_it_is():
    assert autostop_modules() == set(AUTOSTOP_PARTS), "a new autostop module: give it its part"
    for path, part in AUTOSTOP_PARTS.items():
        first = ast.get_docstring(ast.parse((ROOT / path).read_text())).splitlines()[0]
        assert re.match(rf"Autostop, part {part} of 4, ", first), f"{path}: {first!r}"
