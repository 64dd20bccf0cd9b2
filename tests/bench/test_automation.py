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


def test_the_notebook_plans_with_set_values_and_one_experiment_as_the_command_line_does():
    """plan(settings=..., experiment=...) is `eksbench plan dev --set ... --experiment ...`; a malformed setting is
    its one line, and a lone string (not a list of settings) is refused rather than read letter by letter."""
    from core.config.overrides import SetError

    jobs = {r["name"]: r["inputs"] for r in automation.plan(
        "dev", settings=["experiments[1].nodes=2"], experiment="cifar10-elastic").resources
        if r["type"] == "kubernetes:batch/v1:Job" and r["name"].endswith("-job")}
    assert list(jobs) == ["experiments-cifar10-elastic-job"] and jobs[next(iter(jobs))]["spec"]["parallelism"] == 2
    with pytest.raises(SetError):
        automation.plan("dev", settings=["experiments[1].nodes"])
    with pytest.raises(TypeError, match="a list of KEY=VALUE texts"):
        automation.plan("dev", settings="experiments[1].nodes=2")


def test_bad_stack_fails_before_the_cli(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-west-2\n  eksbench:storage: {kind: nfs}\n")
    with pytest.raises(ConfigError):
        automation.up("x", root=tmp_path, yes=True)


@pytest.mark.skipif(shutil.which("pulumi") is not None, reason="the Pulumi CLI is installed here")
def test_missing_cli_is_one_clear_error():
    r = subprocess.run([sys.executable, "-m", "bench", "up", "dev", "--yes"], cwd=ROOT, capture_output=True, text=True)
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


def test_what_spends_or_deletes_takes_yes_explicitly_with_no_default():
    import inspect

    for call in (automation.run, automation.up, automation.destroy):
        yes = inspect.signature(call).parameters["yes"]
        assert yes.kind is yes.KEYWORD_ONLY and yes.default is yes.empty, call.__name__
    with pytest.raises(TypeError, match="yes"):
        automation.run("dev")


@pytest.mark.parametrize("verb", ["run", "destroy"])
def test_yes_false_shows_the_cost_asks_and_a_no_does_nothing(verb, tmp_path, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no Pulumi CLI: a yes would stop there, a no never gets there
    kwargs = {"results_root": tmp_path / "r"} if verb == "run" else {}
    with pytest.raises(automation.AutomationError, match=f"^eksbench {verb} dev not confirmed: nothing was done"):
        getattr(automation, verb)("dev", yes=False, **kwargs)
    out = capsys.readouterr().out
    assert asked == ["Proceed? [y/N] "] and "$49.30/hour on demand while up" in out
    assert not (tmp_path / "r").exists()
