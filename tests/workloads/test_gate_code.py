"""The gate pod mounts only the code the gate runs (workloads/code_manifests.py ``imported_files``): a sweep's
plan registers one gate a run, and each carried the whole code tree's items before."""

from __future__ import annotations

import os
import subprocess
import sys

from workloads.code_files import read_code_files
from workloads.code_manifests import code_config_map_manifest, code_volume, imported_files
from workloads.gate_manifests import GATE_MODULE


def test_the_gate_mounts_only_what_it_imports_and_runs_from_that_alone(tmp_path):
    code = code_config_map_manifest(read_code_files(), namespace="ns")
    items = code_volume(code, only=GATE_MODULE)["configMap"]["items"]
    assert len(items) < len(code["data"]) / 5
    for item in items:
        path = tmp_path / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code["data"][item["key"]])
    # Isolated (-I): no site-packages, so not the editable install that finds this checkout's packages either.
    probe = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import {GATE_MODULE}; "
             "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.split('.')[0] in ('core', 'workloads')))")
    done = subprocess.run([sys.executable, "-I", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", "")}, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert loaded and all(f.startswith(str(tmp_path)) for f in loaded), loaded


def test_imported_files_follow_relative_imports_and_imports_inside_functions():
    data = {"p--__init__.py": "", "p--a.py": "from . import b\n", "p--b.py": "def f():\n    from .c import g\n",
            "p--c.py": "import json\n", "p--unused.py": ""}
    assert imported_files(tuple(sorted(data.items())), "p.a") == {"p--__init__.py", "p--a.py", "p--b.py", "p--c.py"}
    assert imported_files(tuple(sorted(data.items())), "p.missing") == frozenset()
    code = {"kind": "ConfigMap", "metadata": {"name": "code"}, "data": data}
    assert len(code_volume(code, only="p.missing")["configMap"]["items"]) == len(data)  # every file, as before
