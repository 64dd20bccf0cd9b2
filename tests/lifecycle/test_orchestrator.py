"""The orchestrator's rules with a scripted backend (no processes): teardown always, exit codes,
deadline and budget; and the ``pulumi up`` progress grouping."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from bench.cloud.preflight import (
    TEARDOWN_MINUTES,
    estimate_usd,
    needed_vcpus,
    run_minutes,
)
from bench.cloud.stack_operations import UpProgress, resource_group
from bench.lifecycle import BackendError, Control, run_lifecycle


class Scripted:
    name = "scripted"

    def __init__(self, fail_in=None, status="succeeded", on_watch=None):
        self.calls, self.fail_in, self.status, self.on_watch = [], fail_in, status, on_watch

    def _phase(self, name, ctl):
        self.calls.append(name)
        if self.fail_in == name:
            raise BackendError(f"{name} broke") if name != "watch" else RuntimeError("boom")

    def provision(self, ctl):
        self._phase("provision", ctl)

    def start(self, ctl):
        self._phase("start", ctl)

    def watch(self, ctl):
        self._phase("watch", ctl)
        if self.on_watch:
            self.on_watch(ctl)

    def interrupt(self, signum):
        self.calls.append(f"interrupt {signum}")

    def teardown(self, ctl):
        self.calls.append("teardown")
        return True

    def collect(self, ctl):
        self.calls.append("collect")
        return [{"experiment": "e", "status": self.status}]


def test_success_runs_every_phase_then_teardown_then_collect(capsys):
    b = Scripted()
    out = run_lifecycle(b, Control())
    assert out.code == 0 and b.calls == ["provision", "start", "watch", "teardown", "collect"]
    assert "succeeded" in capsys.readouterr().out


@pytest.mark.parametrize("phase", ["provision", "start", "watch"])
def test_a_failing_phase_still_tears_down_and_exits_1(phase, capsys):
    b = Scripted(fail_in=phase)
    out = run_lifecycle(b, Control())
    assert out.code == 1 and b.calls[-2:] == ["teardown", "collect"]
    err = capsys.readouterr().err
    assert (f"{phase} broke" in err) if phase != "watch" else ("RuntimeError: boom" in err)


def test_a_failed_experiment_exits_1():
    assert run_lifecycle(Scripted(status="failed"), Control()).code == 1


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_watch_is_recorded_not_raised(sig, code):
    b = Scripted(status="interrupted", on_watch=lambda ctl: (os.kill(os.getpid(), sig), ctl.wait(5)))
    out = run_lifecycle(b, Control())
    assert out.code == code and out.reason == "interrupted"
    assert f"interrupt {int(sig)}" in b.calls and b.calls[-2:] == ["teardown", "collect"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


# A run whose output reader went away, in a child whose stdout is a pipe nobody reads (`bench run ... | head -3`);
# the watch prints progress as every backend does. Its outcome comes back in a file.
CLOSED_READER_RUN = """
import json, sys
from bench import progress
from bench.lifecycle import Control, run_lifecycle
from tests.lifecycle.test_orchestrator import Scripted

b = Scripted(on_watch=lambda ctl: [progress.line(f"step {i}") for i in range(3)])
out = run_lifecycle(b, Control())
with open(sys.argv[1], "w") as f:
    json.dump({"calls": b.calls, "code": out.code, "note": out.output_note}, f)
"""


def test_a_run_whose_output_reader_went_away_runs_to_its_end_and_says_so(tmp_path):
    """Before: rich turned the broken pipe into SystemExit(1) in the watch: teardown ran, collect did not, exit 1
    (on AWS: a run torn down mid-way, its results never copied home)."""
    import json
    import subprocess
    import sys

    from tests.lifecycle.conftest import ROOT
    from tests.support.closed_output import run_into_closed_pipe

    done = run_into_closed_pipe([sys.executable, "-c", CLOSED_READER_RUN, str(tmp_path / "outcome.json")],
                                cwd=ROOT, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["calls"] == ["provision", "start", "watch", "teardown", "collect"]
    assert outcome["code"] == 0
    assert outcome["note"].startswith("output reader closed at ") and "the run went on" in outcome["note"]
    assert f"note: {outcome['note']}" in done.stderr  # stderr still has its reader: the user is told


def test_deadline_and_budget():
    now = [0.0]
    ctl = Control(deadline_s=60, clock=lambda: now[0])
    now[0] = 59
    assert not ctl.check()
    now[0] = 61
    assert ctl.check() and ctl.reason == "deadline" and ctl.exit_code(False) == 0
    now[0] = 0
    ctl = Control(hourly_usd=60.0, max_cost_usd=20.0, clock=lambda: now[0])  # $1 a minute, 10 min teardown
    assert not ctl.check()  # nothing billed before provisioning
    ctl.start_billing()
    now[0] = 9 * 60
    assert not ctl.check()  # $9 spent + $10 teardown reserve <= $20
    now[0] = 11 * 60
    assert ctl.check() and ctl.reason == "budget"
    assert run_lifecycle(Scripted(on_watch=lambda c: c.request_stop("budget")), Control()).code == 1


def test_the_budget_stop_says_what_its_dollars_are_priced_at(capsys):
    now = [0.0]
    ctl = Control(hourly_usd=60.0, max_cost_usd=20.0, clock=lambda: now[0],
                  prices="instances at us-east-1 on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 "
                         "P4/P5 price cut")
    ctl.start_billing()
    now[0] = 11 * 60
    assert ctl.check() and ctl.reason == "budget"
    assert ("budget reached: $11.00 spent (instances at us-east-1 on-demand list prices, SkyPilot catalog e385a0d, after "
            "the June 2025 P4/P5 price cut), $20.00 allowed") in capsys.readouterr().err


def test_cost_window_sums_sequential_and_takes_the_longest_parallel():
    exps = (SimpleNamespace(timeout_minutes=30, repeats=1), SimpleNamespace(timeout_minutes=90, repeats=1))
    assert run_minutes(SimpleNamespace(experiments=exps, execution="sequential")) == 120
    assert run_minutes(SimpleNamespace(experiments=exps, execution="parallel")) == 90
    assert estimate_usd(60.0, 20, 90) == pytest.approx(20 + 90 + TEARDOWN_MINUTES)


def test_quota_need_is_desired_nodes_times_vcpus_per_family():
    groups = (SimpleNamespace(instance_type="p3.16xlarge", desired_size=2, capacity_type="ON_DEMAND"),
              SimpleNamespace(instance_type="g5.2xlarge", desired_size=3, capacity_type="ON_DEMAND"),
              SimpleNamespace(instance_type="g5.2xlarge", desired_size=1, capacity_type="SPOT"))
    need = needed_vcpus(SimpleNamespace(gpu_node_groups=groups))
    assert need[("P", "ON_DEMAND")][0] == 128 and need[("G", "ON_DEMAND")][0] == 24 and need[("G", "SPOT")][0] == 8


def test_resource_groups_from_urns():
    assert resource_group("urn:pulumi:dev::eksbench::eksbench:infra:Network$aws:ec2/vpc:Vpc::network-vpc") == "Network"
    assert resource_group("urn:pulumi:dev::eksbench::pulumi:pulumi:Stack$eksbench:infra:Network::network") == "Network"
    nested = "urn:pulumi:dev::eksbench::eksbench:workloads:ExperimentSuite$eksbench:workloads:TrainingJob$kubernetes:batch/v1:Job::j"
    assert resource_group(nested) == "ExperimentSuite"
    assert resource_group("urn:pulumi:dev::eksbench::pulumi:pulumi:Stack::eksbench-dev") == "stack"
    assert resource_group("urn:pulumi:dev::eksbench::pulumi:providers:aws::default") == "providers"


def test_up_progress_prints_a_line_when_a_group_starts_and_when_it_is_done():
    from pulumi.automation.events import EngineEvent

    lines, now = [], [0.0]
    urns = [f"urn:pulumi:dev::eksbench::eksbench:infra:Network$aws:ec2/subnet:Subnet::s{i}" for i in range(2)]
    progress = UpProgress(urns, clock=lambda: now[0], out=lines.append)

    def ev(kind, urn):
        return EngineEvent.from_json({kind: {"metadata": {"op": "create", "urn": urn, "type": "t", "provider": ""}}})

    progress(ev("resourcePreEvent", urns[0]))
    progress(ev("resourcePreEvent", urns[1]))
    now[0] = 75
    progress(ev("resOutputsEvent", urns[0]))
    assert lines == ["[ 0:00] up: Network started (2 planned)"]
    progress(ev("resOutputsEvent", urns[1]))
    assert lines[-1] == "[ 1:15] up: Network done (2 resources, 1:15)"
