"""An experiment that a local run never started still has a row: ``bench.local.backend`` writes it a ``not run``
summary saying what stopped the run first, whatever phase the stop came in."""

from __future__ import annotations

import json
import signal

import pytest

from bench.lifecycle import Control
from bench.local import plan as lr
from bench.local.backend import LocalBackend
from bench.local.observe import local_status_rows
from bench.local.result_rows import not_run_reason
from program.stack_files import ROOT, load_stack_config


def test_a_ctrl_c_before_the_experiments_were_built_leaves_a_not_run_row_for_each(tmp_path):
    """A Ctrl-C while etcd started (provision): no experiment ran, and none had a row in status before."""
    cfg = load_stack_config("dev", ROOT, cluster=False)
    run_dir = tmp_path / "dev" / "r1"
    plan = lr.plan_local(cfg.experiments, cfg.local, run_dir=run_dir)
    backend = LocalBackend(stack="dev", run_id="r1", run_dir=run_dir, plan=plan, results_root=tmp_path)
    ctl = Control()
    ctl.request_stop("interrupted", signal.SIGINT)
    rows = backend.collect(ctl)
    runnable = [e for e in plan if not e.skip]
    assert runnable and [r["status"] for r in rows[:len(runnable)]] == ["not run"] * len(runnable)
    for e in runnable:  # the dev stack's experiments have no repeats: one folder each
        doc = json.loads((run_dir / e.name / "summary.json").read_text())
        assert (doc["status"], doc["stop_reason"], doc["signal"], doc["exit_code"]) == (
            "not run", "Ctrl-C before it started", "SIGINT", None)
    seen = {(r["experiment"], r["repeat"]): (r["status"], r["stop_reason"]) for r in local_status_rows(tmp_path, "dev")}
    assert len(seen) == len(runnable) and set(seen.values()) == {("not run", "Ctrl-C before it started")}


@pytest.mark.parametrize("reason, sent, told", [
    ("interrupted", "SIGTERM", "SIGTERM before it started"), ("interrupted", None, "an interrupt before it started"),
    ("deadline", None, "the run's deadline came before it started"),
    ("budget", None, "the run's budget was spent before it started"),
    (None, None, "the run stopped before it started")])
def test_a_not_run_summary_says_what_came_first(reason, sent, told):
    assert not_run_reason(reason, sent) == told
