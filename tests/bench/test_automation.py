"""The Automation API layer: validates before starting the CLI, and says clearly what is missing."""

import shutil
import subprocess
import sys

import pytest

from bench import automation
from core.config.fields import ConfigError
from program.stack_files import ROOT


def test_plan_needs_no_cli():
    assert automation.plan("dev").outputs["cluster_name"] == "eksbench-dev"


def test_bad_stack_fails_before_the_cli(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-west-2\n  eksbench:storage: {kind: nfs}\n")
    with pytest.raises(ConfigError):
        automation.up("x", root=tmp_path)


@pytest.mark.skipif(shutil.which("pulumi") is not None, reason="the Pulumi CLI is installed here")
def test_missing_cli_is_one_clear_error():
    r = subprocess.run([sys.executable, "-m", "bench", "up", "dev"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("error: the Pulumi CLI is not on PATH") and "Traceback" not in r.stderr


def test_status_reads_the_projects_results_wherever_python_runs(tmp_path, monkeypatch):
    """A notebook's working folder is notebooks/: automation.status("dev") reads <project>/results as the command
    line does, not ./results under whatever folder Python started in."""
    import json

    from bench import automation
    from core.contract.names import SUMMARY_FILE

    project = tmp_path / "proj"
    (project / "results" / "dev" / "r1" / "resnet50-synthetic").mkdir(parents=True)
    (project / "Pulumi.dev.yaml").write_text((ROOT / "Pulumi.dev.yaml").read_text())
    (project / "results" / "dev" / "r1" / "resnet50-synthetic" / SUMMARY_FILE).write_text(json.dumps(
        {"experiment": "resnet50-synthetic", "status": "succeeded", "started_at": "2026-11-27T09:00:00Z"}))
    elsewhere = tmp_path / "notebooks"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    st = automation.status("dev", root=project)
    assert "r1" in json.dumps(st["local_runs"], default=str)
