"""The lifecycle with the local backend, for real (torchrun agents, etcd): a failing experiment,
Ctrl-C, SIGTERM, a hang-up, the run's deadline and ``kill -9`` of bench, and that nothing is left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.lifecycle.conftest import ROOT

pytestmark = pytest.mark.local_run


def write_project(tmp: Path, experiments: list[dict], *, steps: int = 20, execution: str = "sequential") -> Path:
    project = tmp / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    config = {"aws:region": "us-east-1", "eksbench:execution": execution,
              "eksbench:cluster": {"public_access_cidrs": []},
              "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "desired_size": 2,
                                            "max_size": 2}],
              "eksbench:experiments": experiments,
              # A stack file is validated whole, for AWS too: an endpoint choice and a results home.
              "eksbench:results": {"home_stack": "organization/eksbench/home"},
              "eksbench:local": {"nodes": 2, "steps": steps, "batch_size": 4, "image_size": 32,
                                 "width_per_group": 8}}
    (project / "Pulumi.loc.yaml").write_text(yaml.safe_dump({"config": config}))
    return project


def exp(name: str, **kw) -> dict:
    return {"name": name, "workload": "resnet50", "nodes": 2, "steps": 5000, "dataset": "synthetic", **kw}


def argv(project: Path, results: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench", "run", "loc", "--local", "--run-id", "t", "--project-dir", str(project),
            "--results-root", str(results), "--progress-every", "1", *extra]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    e["OMP_NUM_THREADS"] = "1"
    return e


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (the run's folder)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmd and state != "Z":
            out.append(int(d.name))
    return out


def wait_gone(text: str, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = processes_mentioning(text)
        if not left:
            return []
        time.sleep(0.2)
    return processes_mentioning(text)


def start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_training(run: Path, timeout: float = 150) -> None:
    """Until a rank has written a step (the nodes rendezvoused and train)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(run.glob("*/metrics/rank-*.jsonl")):
            return
        time.sleep(0.2)
    raise AssertionError(f"no training step under {run} after {timeout}s")


def test_a_failing_experiment_exits_1_and_leaves_no_process(tmp_path):
    project = write_project(tmp_path, [exp("bad", args=["--lr=not-a-number"], max_restarts=0)], steps=5)
    results = tmp_path / "results"
    done = subprocess.run(argv(project, results), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[bad] FAILED" in done.stdout
    assert any(line.startswith("bad") and "failed" in line for line in done.stdout.splitlines())
    assert wait_gone(str(results), 10) == []
    assert not (results / "loc" / "t" / "_tmp").exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_stops_the_nodes_and_etcd_and_exits_128_plus_signal(tmp_path, sig, code):
    if not shutil.which("etcd"):
        pytest.skip("no etcd binary on PATH")
    project = write_project(tmp_path, [exp("long")], steps=5000)
    results = tmp_path / "results"
    run = results / "loc" / "t"
    proc = start(argv(project, results))
    try:
        wait_training(run)
        assert list((run / "_tmp").glob("torchelastic_*")), "torchrun's temp dirs go under the run"
        assert processes_mentioning("eksbench-etcd-"), "etcd runs"
        if sig == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        else:
            proc.send_signal(sig)  # a scheduler's stop, or a closed terminal's hang-up: bench only
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, out
    assert "received: stopping" in out
    assert any(line.startswith("long") and "interrupted" in line for line in out.splitlines()), out
    summary = json.loads((run / "long" / "summary.json").read_text())  # the record says so too, not "failed"
    told = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal hung up)"}
    assert (summary["status"], summary["stop_reason"], summary["signal"], summary["exit_code"]) == (
        "interrupted", told[sig], sig.name, code), summary  # the signal the user sent, not the launchers' SIGTERM
    assert wait_gone(str(run), 10) == []
    assert not (run / "_tmp").exists()


def test_a_ctrl_c_in_the_first_of_two_experiments_is_told_as_ctrl_c_and_the_second_is_a_not_run_row(tmp_path):
    """Before: status said ``interrupted (SIGTERM: an interrupt (Ctrl-C, or the run stopp…``, the summary
    ``exit_code: 143``, and the experiment that never started had no row in status nor in results.load."""
    project = write_project(tmp_path, [exp("first"), exp("second")], steps=5000)
    results = tmp_path / "results"
    run = results / "loc" / "t"
    proc = start(argv(project, results))
    try:
        wait_training(run)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("first")] == [
        ["first", "interrupted", "(Ctrl-C)"]], out  # the results table says so as status does
    first = json.loads((run / "first" / "summary.json").read_text())
    assert (first["status"], first["stop_reason"], first["exit_code"]) == ("interrupted", "Ctrl-C", 130), first
    second = json.loads((run / "second" / "summary.json").read_text())
    assert (second["status"], second["stop_reason"]) == ("not run", "Ctrl-C before it started"), second
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("second")] == [["second", "not", "run"]]
    status = subprocess.run([sys.executable, "-m", "bench", "status", "loc", "--project-dir", str(project),
                             "--results-root", str(results)], cwd=ROOT, env=env(), capture_output=True, text=True,
                            timeout=60)
    rows = {line.split()[1]: " ".join(line.split()[2:]) for line in status.stdout.splitlines() if line.startswith("t ")}
    assert rows["first"].startswith("interrupted (Ctrl-C) "), status.stdout
    assert rows["second"].startswith("not run (Ctrl-C before it started) "), status.stdout
    from bench import results as loaded

    df = loaded.load(str(run))
    assert dict(zip(df["experiment"], df["status"])) == {"first": "interrupted", "second": "not run"}
    assert wait_gone(str(run), 10) == []


def test_a_run_whose_reader_closes_after_the_first_line_runs_to_its_end(tmp_path):
    """``eksbench run ... --local | head -1``. Before: the run stopped a second later, exit 1 and nothing on
    stderr, no results table, and its summary said ``interrupted`` by a SIGTERM nobody sent."""
    project = write_project(tmp_path, [exp("one", steps=20)], steps=20)
    results = tmp_path / "results"
    run = results / "loc" / "t"
    with open(tmp_path / "stderr", "w+") as err:
        proc = subprocess.Popen(argv(project, results), cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=err,
                                text=True, start_new_session=True)
        try:
            first = proc.stdout.readline()
            proc.stdout.close()  # the reader goes away, as head does after its line
            code = proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        err.seek(0)
        stderr = err.read()
    assert first.startswith("stack loc, run t:"), first
    assert code == 0, stderr
    assert "Traceback" not in stderr and "note: output reader closed at" in stderr, stderr
    summary = json.loads((run / "one" / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["coverage"]["steps"] == 20, summary
    record = json.loads((run / "_run.json").read_text())  # the run's record says why its output stopped
    assert record["output"].startswith("output reader closed at ") and "the run went on" in record["output"]
    assert record["pid"] == proc.pid
    assert wait_gone(str(run), 10) == []


def test_the_run_deadline_stops_it_exit_1(tmp_path):
    project = write_project(tmp_path, [exp("long")], steps=5000)
    results = tmp_path / "results"
    done = subprocess.run(argv(project, results, "--deadline", "0.5"), cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run deadline reached" in done.stderr
    assert any(line.startswith("long") and " deadline " in line for line in done.stdout.splitlines()), done.stdout
    summary = json.loads((results / "loc" / "t" / "long" / "summary.json").read_text())
    assert summary["status"] == "deadline" and "the run's deadline" in summary["stop_reason"], summary
    assert wait_gone(str(results), 10) == []


def test_kill_9_of_bench_leaves_no_etcd_nor_launcher(tmp_path):
    if not shutil.which("etcd"):
        pytest.skip("no etcd binary on PATH")
    project = write_project(tmp_path, [exp("long")], steps=5000)
    results = tmp_path / "results"
    run = results / "loc" / "t"
    proc = start(argv(project, results))
    try:
        wait_training(run)
        proc.kill()  # no handler runs: only the parent-death signals can clean up
        proc.wait(timeout=10)
        killed = time.monotonic()
        # etcd gets SIGKILL at once (its data dir is under the run's _tmp)
        assert wait_gone(str(run / "_tmp" / "eksbench-etcd-"), 5) == []
        # the launchers get SIGTERM, forward it to torchrun and write the summary (grace 15 s);
        # the bound is generous for a loaded 2-core CI machine
        assert wait_gone(str(run), 40) == []
        print(f"every child gone {time.monotonic() - killed:.1f} s after kill -9")
    finally:
        for pid in processes_mentioning(str(run)):
            os.kill(pid, signal.SIGKILL)
    assert (run / "long" / "summary.json").is_file()


def test_a_run_id_with_results_is_refused_unless_resume(tmp_path):
    project = write_project(tmp_path, [exp("one")])
    results = tmp_path / "results"
    (results / "loc" / "t" / "one").mkdir(parents=True)
    (results / "loc" / "t" / "one" / "summary.json").write_text('{"status": "succeeded"}')
    done = subprocess.run(argv(project, results), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "already has results" in done.stderr and "--resume" in done.stderr
    done = subprocess.run(argv(project, results, "--resume", "--dry-run"), cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
