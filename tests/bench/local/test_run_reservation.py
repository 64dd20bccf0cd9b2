"""One run, one folder (bench.local.run_reservation): a run id is reserved by an exclusive create before anything
is written, so two runs of one stack started together never share a folder."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.local.run_reservation import MARKER, RunTaken, read_holder, reserve

ROOT = Path(__file__).resolve().parents[3]


def folder(root: Path):
    return lambda rid: root / "stack" / rid


def test_a_taken_default_id_moves_on_and_an_explicit_one_is_refused(tmp_path):
    first = reserve(folder(tmp_path), "20261127-031500", explicit=False, resume=False)
    second = reserve(folder(tmp_path), "20261127-031500", explicit=False, resume=False)
    assert first == ("20261127-031500", tmp_path / "stack" / "20261127-031500")
    assert second == ("20261127-031500-2", tmp_path / "stack" / "20261127-031500-2")
    assert read_holder(first[1]).pid == os.getpid()
    with pytest.raises(RunTaken, match=rf"^run 20261127-031500 is in use by another eksbench run \(pid {os.getpid()} "
                                       r"on .*\) in .*: wait for it, or pick another --run-id$"):
        reserve(folder(tmp_path), "20261127-031500", explicit=True, resume=False)


def test_a_gone_runs_folder_is_taken_over_and_a_damaged_marker_is_not(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run_dir = tmp_path / "stack" / "t"
    run_dir.mkdir(parents=True)
    (run_dir / MARKER).write_text(json.dumps({"pid": int(gone.stdout), "host": os.uname().nodename,
                                              "started_at": "2026-11-27T00:00:00Z"}))
    assert reserve(folder(tmp_path), "t", explicit=True, resume=False) == ("t", run_dir)
    assert read_holder(run_dir).pid == os.getpid() and list(run_dir.glob(f"{MARKER}.*.old"))
    (tmp_path / "stack" / "u").mkdir()
    (tmp_path / "stack" / "u" / MARKER).write_text("{")
    with pytest.raises(RunTaken, match="could not be read; if no run uses the folder, remove that file"):
        reserve(folder(tmp_path), "u", explicit=True, resume=True)


def _reserve_in_child(root: str, queue) -> None:
    queue.put(reserve(folder(Path(root)), "same-second", explicit=False, resume=False)[0])


def test_the_marker_keeps_what_the_run_records_of_itself_and_its_holder(tmp_path):
    from bench.local.run_reservation import record

    _, run_dir = reserve(folder(tmp_path), "r", explicit=True, resume=False)
    record(run_dir, output="output reader closed at 2026-11-28T04:24:56Z; the run went on")
    doc = json.loads((run_dir / MARKER).read_text())
    assert doc["output"] == "output reader closed at 2026-11-28T04:24:56Z; the run went on"
    assert read_holder(run_dir).pid == os.getpid() and sorted(p.name for p in run_dir.iterdir()) == [MARKER]
    (run_dir / MARKER).write_text("{")  # damaged: left as it is, and no exception stops the run's end
    record(run_dir, output="x")
    assert (run_dir / MARKER).read_text() == "{"


def test_runs_reserving_the_same_id_at_once_each_get_their_own(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_reserve_in_child, args=(str(tmp_path), queue)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    got = sorted(queue.get(timeout=5) for _ in procs)
    assert got == sorted(["same-second", *(f"same-second-{k}" for k in range(2, 7))])


@pytest.mark.local_run
def test_two_bench_runs_of_one_stack_started_together_write_two_folders(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    config = {"aws:region": "us-east-1", "eksbench:cluster": {"public_access_cidrs": []},
              "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "desired_size": 1,
                                            "max_size": 1}],
              "eksbench:experiments": [{"name": "one", "workload": "resnet50", "nodes": 1, "steps": 4,
                                        "dataset": "synthetic"}],
              "eksbench:results": {"home_stack": "organization/eksbench/home"},
              "eksbench:local": {"nodes": 1, "steps": 4, "batch_size": 2, "image_size": 32, "width_per_group": 4}}
    (project / "Pulumi.loc.yaml").write_text(yaml.safe_dump({"config": config}))
    argv = [sys.executable, "-m", "bench", "run", "loc", "--local", "--project-dir", str(project),
            "--results-root", str(tmp_path / "results")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = sorted(p.name for p in (tmp_path / "results" / "loc").iterdir())
    assert len(runs) == 2, runs
    # the run that found the other one training says so; both summaries carry it (each measured a shared CPU)
    assert all("warning: shared the CPU with local run loc/" in out for out in outs), outs  # at its start or end
    for run in runs:
        s = json.loads((tmp_path / "results" / "loc" / run / "one" / "summary.json").read_text())
        assert s["status"] == "succeeded" and s["throughput"]["processes"] == 1
        assert any(f.startswith("shared the CPU with local run loc/") for f in s["flags"]), s["flags"]
        assert json.loads((tmp_path / "results" / "loc" / run / MARKER).read_text())["shared_cpu"].startswith(
            "shared the CPU with local run loc/")
        assert s["coverage"] == {"steps": 4, "duplicate_lines": 0, "missing_steps": []}


def _marker(run_dir: Path, pid: int, started_at: str) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / MARKER).write_text(json.dumps({"pid": pid, "host": os.uname().nodename, "started_at": started_at}))


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))


def test_a_live_run_is_named_in_a_flag_for_both_runs_and_a_stale_or_reused_pid_is_not(tmp_path):
    """Before: two local runs at once each measured about 57% of one run alone, and neither said so."""
    from bench.local.run_reservation import MARKER as M, flags_file, note_shared_cpu

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        _marker(tmp_path / "loc" / "killed", int(gone.stdout), "2026-11-27T00:00:00Z")  # kill -9 left it
        # a live pid whose process started after the marker was written: a dead run's pid, reused
        _marker(tmp_path / "loc" / "reused", live.pid, "2026-11-27T00:00:00Z")
        mine = tmp_path / "loc" / "mine"
        _marker(mine, os.getpid(), _now())
        assert note_shared_cpu(tmp_path, mine, "loc/mine") is None
        assert not flags_file(mine).exists() and "shared_cpu" not in json.loads((mine / M).read_text())

        _marker(tmp_path / "fab" / "other", live.pid, _now())  # a live run of another stack of the project
        flag = note_shared_cpu(tmp_path, mine, "loc/mine")
        assert flag == (f"shared the CPU with local run fab/other (pid {live.pid}): its throughput is lower than "
                        "the machine gives one run alone")
        assert flags_file(mine).read_text() == flag + "\n"
        assert json.loads((mine / M).read_text())["shared_cpu"] == flag
        assert flags_file(tmp_path / "fab" / "other").read_text().startswith(
            f"shared the CPU with local run loc/mine (pid {os.getpid()})")
    finally:
        live.kill()
        live.wait()


def test_the_launcher_adds_the_runs_flags_to_its_summary(tmp_path):
    from workloads.train.harness.collect import run_flags

    from core.contract import summary_fields as F

    assert run_flags({}) == [] and run_flags({F.RUN_FLAGS_ENV: str(tmp_path / "none")}) == []
    (tmp_path / "flags").write_text("shared the CPU with local run a/b (pid 7)\n\n" + "x" * 400 + "\n"
                                    "shared the CPU with local run a/b (pid 7)\n")
    assert run_flags({F.RUN_FLAGS_ENV: str(tmp_path / "flags")}) == ["shared the CPU with local run a/b (pid 7)",
                                                                    "x" * 300]


@pytest.mark.parametrize("doc", ['{"pid": 1e400, "host": "h", "started_at": "x"}', '{"pid": 0, "host": "h"}',
                                 "PID_TOO_BIG", "[" * 30000 + "]" * 30000], ids=["1e400", "zero", "10**23", "deep"])
def test_a_marker_whose_pid_is_no_process_or_that_nests_deep_reads_as_damaged(tmp_path, doc):
    """A marker holding pid 1e400 (OverflowError), 10**23 with this host (os.kill's OverflowError) or 30,000 nested
    lists (RecursionError) ended every later local run under that results folder in a traceback."""
    import socket

    from bench.local.run_reservation import record

    run_dir = tmp_path / "stack" / "u"
    run_dir.mkdir(parents=True)
    text = json.dumps({"pid": 10**23, "host": socket.gethostname(), "started_at": "x"}) if doc == "PID_TOO_BIG" else doc
    (run_dir / MARKER).write_text(text)
    assert read_holder(run_dir).pid is None
    record(run_dir, output="x")  # left as it is, no exception
    with pytest.raises(RunTaken, match="could not be read"):
        reserve(folder(tmp_path), "u", explicit=True, resume=True)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_marker_or_a_copied_result_that_is_a_pipe_or_a_device_is_not_read(tmp_path, kind, hostile_file):
    """A named pipe planted as the run's marker or as a summary copied home hung the reader; /dev/zero filled
    memory. Each reads as damaged (the marker) or missing (the summary), at once."""
    import signal

    from bench.cloud.result_rows import read_local_json
    from bench.local.run_reservation import record
    run_dir = tmp_path / "stack" / "u"
    run_dir.mkdir(parents=True)
    for name in (MARKER, "summary.json"):
        hostile_file(run_dir / name, kind)
    before = signal.signal(signal.SIGALRM, lambda *_: pytest.fail(f"reading a {kind} did not return"))
    signal.alarm(20)
    try:
        assert read_holder(run_dir).pid is None
        record(run_dir, output="x")
        with pytest.raises(RunTaken, match="could not be read"):
            reserve(folder(tmp_path), "u", explicit=True, resume=True)
        assert read_local_json(run_dir / "summary.json") is None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
