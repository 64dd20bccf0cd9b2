"""bench.local.launch: each framework's local processes, and the venv a framework runs from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

from bench.local import plan as lr
from bench.local.framework_venvs import ROOT, venv_dir
from bench.local.launch import (
    LOCAL_LAUNCHES,
    LocalContext,
    local_processes,
    missing_venvs,
)
from core.config.model import Experiment, LocalRun


def ctx(python="fw-python"):
    ports = iter(range(41000, 42000))
    return LocalContext(launcher_python="py", python=python, endpoint="127.0.0.1:5", rdzv_id="dev-1-e",
                        ports=lambda: next(ports))


def planned(framework, tmp_path, **kw):
    return lr.scale_experiment(Experiment(name="e", framework=framework, min_nodes=2, max_nodes=2, **kw), LocalRun(),
                               results_dir=str(tmp_path / "e"), data_dir=str(tmp_path / "_data"))


def test_pytorch_entry_is_the_torchrun_node_command(tmp_path):
    exp = planned("pytorch", tmp_path)
    procs = LOCAL_LAUNCHES["pytorch"].processes(exp, ctx(python="py"))
    assert [list(p.argv) for p in procs] == [lr.node_command(exp, n, python="py", endpoint="127.0.0.1:5",
                                                             rdzv_id="dev-1-e") for n in range(2)]
    assert all(not p.env for p in procs)


def test_tensorflow_workers_get_the_clusters_tf_config_on_loopback(tmp_path):
    exp = planned("tensorflow", tmp_path)
    assert exp.skip is None and exp.procs_per_node == 1 and exp.rdzv_backend == "TF_CONFIG"
    procs = LOCAL_LAUNCHES["tensorflow"].processes(exp, ctx())
    configs = [json.loads(p.env["TF_CONFIG"]) for p in procs]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert configs[0]["cluster"] == configs[1]["cluster"] == {"worker": ["127.0.0.1:41000", "127.0.0.1:41001"]}
    for i, p in enumerate(procs):
        argv = list(p.argv)
        launcher, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
        assert launcher[:3] == ["py", "-m", "workloads.train.harness.launch"]
        assert launcher[launcher.index("--summary") + 1] == ("always" if i == 0 else "never")
        assert launcher[launcher.index("--node-id") + 1] == f"node-{i}"
        assert command[:3] == ["fw-python", "-m", "workloads.train.tensorflow"]
        # the launcher is told the shape and the trainer's arguments; it never reads them back from the command
        assert launcher[launcher.index("--nodes") + 1] == "2" and launcher[launcher.index("--procs-per-node") + 1] == "1"
        assert json.loads(launcher[launcher.index("--train-config") + 1]) == asdict(exp.train)
        assert p.env["EKSBENCH_FRAMEWORK"] == "tensorflow"


def test_a_missing_venv_is_one_line_naming_the_command_that_builds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("EKSBENCH_VENVS", str(tmp_path / "venvs"))
    exp = planned("tensorflow", tmp_path)
    (line,) = missing_venvs([exp, planned("pytorch", tmp_path)])
    assert "bash .ci/setup-framework tensorflow" in line and "\n" not in line
    assert str(venv_dir("tensorflow")) in line
    out = subprocess.run([sys.executable, "-m", "bench", "run", "dev", "--local", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0  # the dev stack has no tensorflow experiment: no venv needed


def test_bench_run_local_refuses_a_missing_venv_before_starting_anything(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for path in (ROOT / "Pulumi.yaml", ROOT / "tests" / "stacks" / "Pulumi.frameworks.yaml"):
        (project / path.name).write_text(path.read_text())
    out = subprocess.run([sys.executable, "-m", "bench", "run", "frameworks", "--local", "--project-dir", str(project),
                          "--results-root", str(tmp_path / "results")], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "EKSBENCH_VENVS": str(tmp_path / "venvs")})
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: framework tensorflow runs from a venv of its own") and \
        "`bash .ci/setup-framework tensorflow`" in line
    assert not (tmp_path / "results").exists()


def test_the_venv_path_is_the_setup_scripts(tmp_path):
    """The shell script asks bench.local.framework_venvs for the folder; without a build hook its hash is the
    requirements file's own sha256, with one it covers the hook and its patches too."""
    script = (ROOT / ".ci" / "setup-framework").read_text()
    assert '-m bench.local.framework_venvs "$name"' in script and "EKSBENCH_VENVS" in script
    digest = subprocess.run(["sha256sum", str(ROOT / "requirements-tensorflow.txt")], capture_output=True,
                            text=True, check=True).stdout[:16]
    assert venv_dir("tensorflow", environ={"EKSBENCH_VENVS": "/v"}).name == f"tensorflow-{digest}"
    (tmp_path / ".ci" / "frameworks").mkdir(parents=True)
    (tmp_path / "requirements-fw.txt").write_text("x==1\n")
    bare = venv_dir("fw", root=tmp_path, environ={"EKSBENCH_VENVS": "/v"})
    (tmp_path / ".ci" / "frameworks" / "fw.sh").write_text("framework_build() { :; }\n")
    (tmp_path / ".ci" / "frameworks" / "fwother.sh").write_text("not fw's\n")
    hooked = venv_dir("fw", root=tmp_path, environ={"EKSBENCH_VENVS": "/v"})
    (tmp_path / ".ci" / "frameworks" / "fw-fix.patch").write_text("--- a\n")
    patched = venv_dir("fw", root=tmp_path, environ={"EKSBENCH_VENVS": "/v"})
    assert len({bare, hooked, patched}) == 3
    (tmp_path / ".ci" / "frameworks" / "fwother.sh").write_text("changed\n")
    assert venv_dir("fw", root=tmp_path, environ={"EKSBENCH_VENVS": "/v"}) == patched


def test_local_processes_refuse_a_missing_venv(tmp_path, monkeypatch):
    monkeypatch.setenv("EKSBENCH_VENVS", str(tmp_path / "venvs"))
    try:
        local_processes(planned("tensorflow", tmp_path), etcd=None, rdzv_id="x")
    except RuntimeError as e:
        assert "setup-framework tensorflow" in str(e)
    else:
        raise AssertionError("no error for a missing venv")
