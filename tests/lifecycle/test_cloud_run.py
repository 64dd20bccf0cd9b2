"""``python -m bench run <stack>`` end to end against the fake Pulumi CLI (driven by the real
Automation API) and a moto server: preflight, up, watch, collect, destroy, exit codes."""

from __future__ import annotations

import json
import signal
import time

import boto3
import pytest

from tests.lifecycle.conftest import BUCKET, QUOTA_VCPUS, REGION, ROOT

pytestmark = pytest.mark.local_run


def ok_scenario(project, **over):
    out = project.outputs()
    scenario = {"outputs": out, "up_step_s": 0.02,
                "experiments": {n: {"uri": u, "after": 0.3 + 0.2 * i, "status": "succeeded"}
                                for i, (n, u) in enumerate(out["experiment_results"].items())}}
    scenario.update(over)
    return scenario


def test_success_collects_results_destroys_and_exits_0(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = project.run(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    cmds = project.commands()
    up = [c for c in cmds if c[:1] == ["up"]]
    assert len(up) == 1 and "--event-log" in up[0] and up[0][up[0].index("--event-log") + 1].startswith("tcp://")
    destroys = [c for c in cmds if c[:1] == ["destroy"]]
    assert len(destroys) == 1 and "--remove" not in destroys[0]
    assert not any(c[:2] == ["stack", "rm"] for c in cmds)  # never destroy(remove=True)
    assert cmds.index(up[0]) < cmds.index(destroys[0])
    for name in ("alpha", "beta"):
        summary = json.loads((project.results / stack / "r1" / name / "summary.json").read_text())
        assert summary["status"] == "succeeded"
        assert (project.results / stack / "r1" / name / "logs" / "node-0.log").is_file()
        assert not (project.results / stack / "r1" / name / "checkpoints").exists()
    lines = done.stdout.splitlines()
    assert any(line.startswith("alpha") and "succeeded" in line for line in lines)
    assert "up: Network started" in done.stdout and "up: Network done" in done.stdout, done.stdout + done.stderr
    assert "tearing down" in done.stdout and "after the last result arrived" in done.stdout
    assert (project.dir / f"Pulumi.{stack}.yaml").is_file()


def test_a_run_whose_output_reader_went_away_collects_destroys_and_exits_0(project):
    """``eksbench run <stack> | head``. Before: the first progress line raised SystemExit(1) from rich, so the
    run was torn down mid-way and its results never copied home."""
    from tests.support.closed_output import run_into_closed_pipe

    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = run_into_closed_pipe(project.argv(stack), cwd=ROOT, env=project.env(), timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    for name in ("alpha", "beta"):  # copied home
        assert json.loads((project.results / stack / "r1" / name / "summary.json").read_text())["status"] == "succeeded"
    assert [c[0] for c in project.commands() if c[:1] in (["up"], ["destroy"])] == ["up", "destroy"]
    timeline = json.loads((project.results / stack / "r1" / "timeline.json").read_text())
    assert timeline["output"].startswith("output reader closed at ") and "note: output reader closed" in done.stderr


def test_up_failure_destroys_and_exits_1(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, up="fail")
    done = project.run(stack)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "pulumi up failed" in done.stderr and "fake failure for the test" in done.stderr
    assert project.events()[-1] == "destroyed"
    assert "summary-written" not in project.events()


def test_failed_experiment_exits_1_after_destroy_with_its_error(project):
    stack = project.write_stack()
    sc = ok_scenario(project)
    sc["experiments"]["beta"]["status"] = "failed"
    project.scenario = sc
    done = project.run(stack)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[beta] FAILED: RuntimeError: CUDA error: out of memory" in done.stderr
    assert project.events()[-1] == "destroyed"
    assert any(line.startswith("beta") and "failed" in line for line in done.stdout.splitlines())


def test_budget_below_the_estimate_refuses_before_up(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = project.run(stack, "--max-cost", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "above --max-cost $0.50" in errors[0]
    assert project.commands() == []  # the CLI was not even asked


def test_preflight_without_the_cli_is_one_line_exit_2(project):
    stack = project.write_stack()
    (project.bin / "pulumi").unlink()
    env = project.env()
    env["PATH"] = str(project.bin) + ":/usr/bin:/bin"
    done = project.run(stack, env=env)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "Pulumi CLI is not on PATH" in errors[0], done.stderr


def test_preflight_without_credentials_is_one_line_exit_2(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    done = project.run(stack, env=project.env(with_credentials=False))
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "run " + stack + ": no AWS credentials found: set AWS_PROFILE" in errors[0], done.stderr
    assert not any(c[:1] == ["up"] for c in project.commands())


def test_preflight_quota_too_small_refuses(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    QUOTA_VCPUS["L-DB2E81BA"] = 8.0
    done = project.run(stack)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Running On-Demand G and VT instances' (L-DB2E81BA) in us-east-1 is 8 vCPUs; the stack needs 16" \
        in done.stderr


def test_sigint_during_up_cancels_then_destroys_exit_130(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, up="hang")
    proc = project.start(stack)
    try:
        project.wait_for_event_or_call = None
        deadline = time.monotonic() + 90
        while not any(c[:1] == ["up"] for c in project.commands()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() else ""
            time.sleep(0.05)
        time.sleep(1.0)  # up is streaming resources
        import os

        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    events = project.events()
    assert events.count("sigint") == 1  # exactly one SIGINT reached the CLI: no "terminate now"
    assert events.index("up-canceled") < events.index("destroyed"), events
    assert "destroy-locked" not in events
    assert "SIGINT received" in out


def test_sigterm_during_the_watch_destroys_and_exits_143(project):
    stack = project.write_stack()
    sc = ok_scenario(project)
    sc["experiments"]["beta"]["status"] = "never"
    project.scenario = sc
    proc = project.start(stack)
    try:
        project.wait_for_event("summary-written", timeout=90)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, out
    assert project.events()[-1] == "destroyed"
    assert "beta" in out and "interrupted" in out


def test_keep_scales_gpu_groups_to_zero_and_does_not_destroy(project):
    stack = project.write_stack()
    eks = boto3.client("eks", region_name=REGION)
    role = "arn:aws:iam::123456789012:role/eks"
    eks.create_cluster(name="eksbench-lc", roleArn=role, resourcesVpcConfig={"subnetIds": []})
    for ng in ("system-ng", "gpu-g5-ng"):
        eks.create_nodegroup(clusterName="eksbench-lc", nodegroupName=ng, nodeRole=role, subnets=["subnet-1"],
                             scalingConfig={"minSize": 0, "desiredSize": 2, "maxSize": 2})
    project.scenario = ok_scenario(project)
    done = project.run(stack, "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(c[:1] == ["destroy"] for c in project.commands())
    gpu = eks.describe_nodegroup(clusterName="eksbench-lc", nodegroupName="gpu-g5-ng")["nodegroup"]["scalingConfig"]
    system = eks.describe_nodegroup(clusterName="eksbench-lc", nodegroupName="system-ng")["nodegroup"]["scalingConfig"]
    assert gpu["desiredSize"] == 0 and gpu["minSize"] == 0
    assert system["desiredSize"] == 2
    assert f"eksbench destroy {stack}" in done.stdout


def test_deadline_stops_the_run_and_destroys_exit_1(project):
    stack = project.write_stack()
    sc = ok_scenario(project)
    sc["experiments"]["beta"]["status"] = "never"
    project.scenario = sc
    done = project.run(stack, "--deadline", "0.1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run deadline reached" in done.stderr
    assert project.events()[-1] == "destroyed"
    assert any(line.startswith("beta") and " deadline " in line for line in done.stdout.splitlines()), done.stdout


def test_destroy_failing_once_is_retried(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, destroy="fail_once")
    done = project.run(stack)
    assert done.returncode == 0, done.stdout + done.stderr
    assert project.events()[-2:] == ["destroy-failed", "destroyed"]


def test_destroy_failing_twice_reports_what_is_left_exit_1(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project, destroy="fail")
    done = project.run(stack)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "destroy failed twice; 4 resource(s) left" in done.stderr
    assert f"eksbench destroy {stack}" in done.stderr and "aws:ec2/vpc:Vpc network-vpc" in done.stderr


def test_a_run_id_with_results_is_refused_unless_resume(project):
    stack = project.write_stack()
    boto3.client("s3", region_name=REGION).put_object(Bucket=BUCKET, Key="eksbench/lc/r1/alpha/summary.json",
                                                      Body=b'{"status": "succeeded"}')
    project.scenario = ok_scenario(project)
    done = project.run(stack)
    assert done.returncode == 2 and "already has results" in done.stderr, done.stderr
    assert not any(c[:1] == ["up"] for c in project.commands())
    done = project.run(stack, "--resume")
    assert done.returncode == 0, done.stdout + done.stderr


def test_status_and_logs_after_a_run(project):
    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    assert project.run(stack).returncode == 0
    common = ["--project-dir", str(project.dir), "--results-root", str(project.results)]
    import subprocess
    import sys

    from tests.lifecycle.conftest import ROOT

    st = subprocess.run([sys.executable, "-m", "bench", "status", stack, *common], cwd=ROOT, env=project.env(),
                        capture_output=True, text=True, timeout=120)
    assert st.returncode == 0, st.stderr
    assert "pulumi: last destroy succeeded" in st.stdout and "0 resource(s) held" in st.stdout
    # the run is on S3 and copied home: one row, its results the local copy
    rows = [line.split() for line in st.stdout.splitlines() if line.split()[1:2] == ["alpha"]]
    assert len(rows) == 1 and rows[0][2] == "succeeded" and rows[0][-1].startswith(str(project.results)), st.stdout
    logs = subprocess.run([sys.executable, "-m", "bench", "logs", stack, "alpha", *common], cwd=ROOT,
                          env=project.env(), capture_output=True, text=True, timeout=120)
    assert logs.returncode == 0, logs.stderr
    assert "node-0: [workloads.train] rank 0/2" in logs.stdout


def test_two_stacks_run_side_by_side_each_with_its_own_teardown(project):
    project.write_stack("lc")
    project.write_stack("lc2", experiments=[{"name": "gamma", "workload": "resnet50", "nodes": 1, "steps": 20,
                                             "dataset": "synthetic", "timeout_minutes": 5}])
    out1, out2 = project.outputs("lc"), project.outputs("lc2", names=("gamma",))
    project.scenario = {"outputs": out1, "experiments": {
        **{n: {"uri": u, "after": 0.3} for n, u in out1["experiment_results"].items()},
        **{n: {"uri": u, "after": 0.3} for n, u in out2["experiment_results"].items()}}}
    # one scenario file serves both stacks: the fake keys outputs by stack when given "outputs_by_stack"
    project.scenario["outputs_by_stack"] = {"lc": out1, "lc2": out2}
    done = project.run("lc", "lc2", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[lc] " in done.stdout and "[lc2] " in done.stdout
    ups = [c for c in project.commands() if c[:1] == ["up"]]
    destroys = [c for c in project.commands() if c[:1] == ["destroy"]]
    assert sorted(c[c.index("--stack") + 1] for c in ups) == ["lc", "lc2"]
    assert sorted(c[c.index("--stack") + 1] for c in destroys) == ["lc", "lc2"]
    assert (project.results / "lc2" / "r1" / "gamma" / "summary.json").is_file()
    assert (project.dir / ".eksbench" / "work" / "lc").is_dir() and (project.dir / ".eksbench" / "work" / "lc2").is_dir()


def test_automation_run_from_a_notebook_returns_the_rows(project, monkeypatch):
    from bench import automation

    stack = project.write_stack()
    project.scenario = ok_scenario(project)
    for k, v in project.env().items():
        monkeypatch.setenv(k, v)
    rows = automation.run(stack, yes=True, root=project.dir, results_root=project.results, poll=0.1)
    assert [(r["experiment"], r["status"]) for r in rows] == [("alpha", "succeeded"), ("beta", "succeeded")]
    assert project.events()[-1] == "destroyed"
    with pytest.raises(automation.AutomationError, match="above --max-cost"):
        automation.run(stack, yes=True, root=project.dir, results_root=project.results, max_cost=0.01, resume=True)


def test_ctrl_c_during_destroy_does_not_cut_it_short(project):
    import os

    stack = project.write_stack()
    project.scenario = ok_scenario(project, destroy_s=3)
    proc = project.start(stack)
    try:
        deadline = time.monotonic() + 90
        while not any(c[:1] == ["destroy"] for c in project.commands()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert project.events()[-1] == "destroyed" and "sigint" not in project.events()
    assert "received again: still stopping" in out
