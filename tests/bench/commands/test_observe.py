"""``bench status`` and ``bench logs`` ask the lifecycle's backends (``status``, ``logs``) and print.

Without the Pulumi CLI (every call to it fails here), the AWS backend has no state, no outputs and no
S3 location, so what is found comes from the local backend: the runs under the results root, and an
experiment's node logs, latest run or a given one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cloud import pulumi_cli
from bench.commands import observe
from bench.local.backend import LocalBackend
from program.stack_files import ROOT

EXPERIMENT = "resnet50-synthetic"  # an experiment of Pulumi.dev.yaml


@pytest.fixture(autouse=True)
def no_pulumi(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("the Pulumi CLI is not on PATH")

    for name in ("open_stack", "outputs", "stack_outputs"):
        monkeypatch.setattr(pulumi_cli, name, fail)


def node_logs(results: Path, run_id: str, lines: dict[str, str], summary: str | None = None) -> Path:
    exp = results / "dev" / run_id / EXPERIMENT
    (exp / "logs").mkdir(parents=True)
    for node, text in lines.items():
        (exp / "logs" / f"{node}.log").write_text(text)
    if summary is not None:
        (exp / "summary.json").write_text(summary)
    return exp


def test_the_local_backend_lists_runs_and_reads_logs(tmp_path):
    node_logs(tmp_path, "r1", {"node-0": "a\nb\n", "node-1": "c\n"}, summary='{"status": "failed"}')
    node_logs(tmp_path, "r2", {"node-0": "new\n"})
    local = LocalBackend(stack="dev", results_root=tmp_path)
    assert local.status() == {"runs": {"r1": {EXPERIMENT: "failed"}, "r2": {
        EXPERIMENT: "no summary (running, or stopped before its launcher finished)"}}}
    assert list(local.logs(EXPERIMENT, run_id="r1")) == ["node-0: a", "node-0: b", "node-1: c"]
    with pytest.raises(FileNotFoundError, match=f"^not under {tmp_path / 'dev'}$"):
        local.logs("absent")


def test_status_asks_both_backends(tmp_path):
    node_logs(tmp_path, "r1", {"node-0": "x\n"}, summary='{"status": "succeeded"}')
    st = observe.stack_status("dev", ROOT, tmp_path)
    assert st["local_runs"] == {"r1": {EXPERIMENT: "succeeded"}} and st["s3_runs"] == {} and st["state"] is None
    assert st["notes"][0] == "stack state unknown: the Pulumi CLI is not on PATH"
    assert st["notes"][1].startswith("no S3 results location known")
    assert "s3_prefix" not in st
    assert "runs in local:\n    r1\n      resnet50-synthetic: succeeded" in observe.render_status(st)


def test_logs_come_from_the_first_backend_that_has_them_else_say_where_each_looked(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        observe.experiment_logs("dev", EXPERIMENT, root=ROOT, results_root=tmp_path)
    assert str(e.value) == f"no logs for dev/{EXPERIMENT}: not in the cluster, not on S3, not under {tmp_path / 'dev'}"
    node_logs(tmp_path, "r1", {"node-0": "the run\n"})
    assert list(observe.experiment_logs("dev", EXPERIMENT, root=ROOT, results_root=tmp_path)) == ["node-0: the run"]
    with pytest.raises(ValueError, match="no experiment 'nope' in stack dev"):
        observe.experiment_logs("dev", "nope", root=ROOT, results_root=tmp_path)
