"""The in-container launcher: log tee, summary always written (failures and signals too), S3 upload."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.contract import summary_fields as F
from core.contract.launch_command import (
    Launched,
    Torchrun,
    launched_argv,
    launched_torchrun,
    launcher_argv,
    trainer_argv,
)
from core.contract.s3_uri import parse_s3_uri
from core.contract.train_args import TrainArgs
from tests.workloads.conftest import ROOT, child_env, wait_for
from workloads.train.harness import child, collect, launch, outcome
from workloads.train.harness.upload import upload_plan


def test_node_identity_and_who_writes_the_summary():
    assert launch.node_identity("n7", {"JOB_COMPLETION_INDEX": "1"}, "host") == "n7"
    assert launch.node_identity(None, {"JOB_COMPLETION_INDEX": "1"}, "host") == "node-1"
    assert launch.node_identity(None, {}, "host") == "host"
    assert launch.writes_summary("auto", {}) and launch.writes_summary("auto", {"JOB_COMPLETION_INDEX": "0"})
    assert not launch.writes_summary("auto", {"JOB_COMPLETION_INDEX": "2"})
    assert launch.writes_summary("always", {"JOB_COMPLETION_INDEX": "2"})
    assert not launch.writes_summary("never", {})


def test_exit_codes_and_training_config_from_the_launchers_own_arguments():
    """The launcher is told the launch shape and the trainer's arguments (core.contract.launch_command builds both
    the command and these); it never reads them back out of the command."""
    assert outcome.exit_code(0) == 0 and outcome.exit_code(3) == 3 and outcome.exit_code(-15) == 143
    agent = Torchrun(min_nodes=1, max_nodes=2, nproc_per_node=4, max_restarts=0, rdzv_backend="c10d",
                     rdzv_endpoint="h:1", rdzv_id="j", rdzv_conf="")
    head = launcher_argv(python="python", results_dir="r",
                         launched=launched_torchrun(agent, TrainArgs(workload="cifar10", batch_size=16)))
    args = launch.build_parser().parse_args(head[3:] + ["--", "torchrun", "-m", "workloads.train.pytorch"])
    config = args.train_config
    assert config["workload"] == "cifar10" and config["batch_size"] == 16
    assert (args.nodes, args.procs_per_node) == (2, 4)  # "1:2", elastic, runs at 2 nodes at most
    assert launch.build_parser().parse_args(["--results-dir", "r", "--", "python", "x.py"]).train_config is None
    # the experiment's own arguments the trainer would refuse: no config, as the trainer would give none
    assert launched_torchrun(agent, TrainArgs(), ["--precision=fp4"]).train is None
    assert launched_torchrun(agent, TrainArgs(), ["--batch-size=8"]).train.batch_size == 8


def test_summary_document_for_a_failed_run():
    doc = outcome.summary_document(experiment="e", node_id="node-0", command=["x"], returncode=-9, signal_name=None,
                                  started=0.0, ended=90.5, metrics={"throughput": {}}, config=None,
                                  environ={"EKSBENCH_IMAGE": "img:1", "EKSBENCH_GIT_COMMIT": "abc"},
                                  log_tail=["boom"], results_uri=None)
    assert doc["status"] == "failed" and doc["exit_code"] == 137 and doc["wall_time_s"] == 90.5
    assert doc["image"] == "img:1" and doc["git_commit"] == "abc" and doc["log_tail"] == ["boom"]
    assert doc["started_at"] == "1970-01-01T00:00:00Z"


def test_child_environment_gives_each_rendezvous_round_its_own_store():
    assert child.child_env({})["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert child.child_env({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"})["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"


def test_s3_uri_and_upload_ownership(tmp_path):
    assert parse_s3_uri("s3://bucket/a/b") == ("bucket", "a/b/")
    assert parse_s3_uri("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError):
        parse_s3_uri("https://bucket/a")
    for rel in ("summary.json", "metrics/rank-0.jsonl", "logs/node-0.log", "logs/node-1.log",
                "logs/node-0.log.times", "logs/node-1.log.times", "checkpoints/latest.pt",
                "checkpoints/.latest.pt.tmp-1"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    keys0 = [k for _, k in upload_plan(tmp_path, node_id="node-0", summary_node=True, prefix="p/")]
    keys1 = [k for _, k in upload_plan(tmp_path, node_id="node-1", summary_node=False, prefix="p/")]
    assert keys0 == ["p/checkpoints/latest.pt", "p/logs/node-0.log", "p/logs/node-0.log.times",
                     "p/metrics/rank-0.jsonl", "p/summary.json"]
    assert keys1 == ["p/logs/node-1.log", "p/logs/node-1.log.times"]  # a node's log and its lines' times
    assert not set(keys0) & set(keys1)


def run_launcher(tmp_path, *command, extra=()):
    return launch.main(["--results-dir", str(tmp_path), "--node-id", "node-0", "--summary", "always",
                        "--experiment", "t", *extra, "--", *command])


def test_failing_command_leaves_its_log_and_a_failed_summary(tmp_path):
    code = run_launcher(tmp_path, sys.executable, "-c", "import sys; print('about to fail'); sys.exit(3)")
    assert code == 3
    assert "about to fail" in (tmp_path / "logs" / "node-0.log").read_text()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 3 and summary["experiment"] == "t"
    assert summary["log_tail"] == ["about to fail"]


def test_the_launcher_records_when_each_log_line_was_captured_beside_the_log(tmp_path):
    """``bench logs --timestamps``: the log stays the command's output byte for byte, and
    ``logs/node-0.log.times`` gives each line's offset in it and the time it came, across a restart."""
    import time

    script = "import time; print('first', flush=True); time.sleep(0.3); print('second')"
    before = time.time()
    assert run_launcher(tmp_path, sys.executable, "-c", script) == 0
    assert run_launcher(tmp_path, sys.executable, "-c", "print('after a restart')") == 0  # appends to both
    log = (tmp_path / "logs" / "node-0.log").read_bytes()
    assert log == b"first\nsecond\nafter a restart\n"
    stamps = [line.split() for line in (tmp_path / "logs" / "node-0.log.times").read_text().splitlines()]
    assert [int(offset) for offset, _ in stamps] == [0, len(b"first\n"), len(b"first\nsecond\n")]
    times = [float(t) for _, t in stamps]
    assert before <= times[0] and times[1] - times[0] >= 0.25 and times[2] >= times[1]


def test_missing_command_still_writes_a_failed_summary(tmp_path):
    assert run_launcher(tmp_path, str(tmp_path / "no-such-binary")) == 127
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"


@pytest.mark.local_run
def test_failing_training_script_leaves_log_and_failed_summary(tmp_path):
    train = TrainArgs(workload="cifar10", data_dir=str(tmp_path / "nowhere"), results_dir=str(tmp_path / "r"), steps=2)
    code = run_launcher(tmp_path / "r", sys.executable, *trainer_argv(train),
                        extra=launched_argv(Launched(train=train)))
    assert code == 1
    log = (tmp_path / "r" / "logs" / "node-0.log").read_text()
    assert "FileNotFoundError" in log and "no CIFAR-10" in log
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["config"]["workload"] == "cifar10"
    assert summary["coverage"]["steps"] == 0


@pytest.mark.local_run
def stopped_launcher(tmp_path: Path, sig: signal.Signals, stop: str | None) -> tuple[int, str, dict]:
    """(exit code, node log, summary) of a launcher whose command waits, sent ``sig`` once the command runs;
    ``stop``: what whoever stopped it wrote in the stop file first."""
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('child got SIGTERM', flush=True), sys.exit(143)))\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    env = child_env()
    if stop is not None:
        (tmp_path / "stop").write_text(stop)
        env[F.STOP_REASON_ENV] = str(tmp_path / "stop")
    proc = subprocess.Popen([sys.executable, "-m", "workloads.train.harness.launch", "--results-dir", str(tmp_path / "r"),
                             "--node-id", "node-0", "--", sys.executable, "-c", script],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "r" / "logs" / "node-0.log"
    wait_for(lambda: log.exists() and "ready" in log.read_text(), 30, "the child to start", [proc])
    proc.send_signal(sig)
    code = proc.wait(timeout=30)
    return code, log.read_text(), json.loads((tmp_path / "r" / "summary.json").read_text())


@pytest.mark.parametrize("sig, code, cause, status", [
    (signal.SIGTERM, 143, None, "interrupted"), (signal.SIGHUP, 129, None, "interrupted"),
    (signal.SIGTERM, 143, "deadline", "deadline"), (signal.SIGTERM, 143, "timeout", "timeout"),
    (signal.SIGTERM, 143, "\x1b[2Jrm -rf", "interrupted")])
def test_a_signal_is_forwarded_and_the_summary_says_why_the_run_stopped(tmp_path, sig, code, cause, status):
    """SIGTERM and a hang-up reach the command; the summary records interrupted, or the cause whoever stopped the
    run wrote (bench run's deadline, an experiment's timeout), never a word outside those."""
    exited, log, summary = stopped_launcher(tmp_path, sig, cause)
    assert exited == code
    if sig == signal.SIGTERM:
        assert "child got SIGTERM" in log
    assert summary["status"] == status and summary["signal"] == sig.name and summary["exit_code"] == code
    assert summary["stop_reason"].startswith(f"{sig.name}: ")


@pytest.mark.parametrize("sent, code, reason", [("SIGINT", 130, "Ctrl-C"), ("SIGTERM", 143, "SIGTERM"),
                                                ("SIGHUP", 129, "SIGHUP (the terminal hung up)")])
def test_the_signal_the_user_sent_to_bench_run_is_the_one_its_summary_records(tmp_path, sent, code, reason):
    """bench run stops its launchers with SIGTERM whatever the user sent it. Before: a Ctrl-C was recorded as
    ``SIGTERM: an interrupt (Ctrl-C, or the run stopping)``, exit code 143."""
    exited, _, summary = stopped_launcher(tmp_path, signal.SIGTERM, F.stop_text(F.INTERRUPTED, sent))
    assert exited == code
    assert (summary["status"], summary["stop_reason"], summary["signal"], summary["exit_code"]) == (
        "interrupted", reason, sent, code)


def test_a_stop_file_names_its_cause_and_the_users_signal_and_nothing_else():
    causes = collect.STOP_CAUSES
    assert F.stop_text("interrupted", "SIGINT") == "interrupted SIGINT" and F.stop_text("deadline") == "deadline"
    assert F.stop_text("interrupted", "SIGKILL") == "interrupted"
    assert F.parse_stop("interrupted SIGINT\n", causes) == ("interrupted", "SIGINT")
    assert F.parse_stop("timeout", causes) == ("timeout", None)
    assert F.parse_stop("interrupted SIGUSR1", causes) == ("interrupted", None)
    assert F.parse_stop("\x1b[2J SIGINT", causes) == (None, None) and F.parse_stop("", causes) == (None, None)
    # only an interrupt is told by the user's signal: a deadline or a timeout stays what it was
    assert outcome.run_status(143, "SIGTERM", None, "interrupted", "SIGINT") == ("interrupted", "Ctrl-C")
    assert outcome.run_status(143, "SIGTERM", None, "deadline", "SIGINT") == ("deadline", "SIGTERM: the run's deadline")


def test_run_status_puts_divergence_first_and_names_each_stop():
    diverged = {"step": 4, "reason": "non-finite loss (nan) at step 4"}
    assert outcome.run_status(0, None, diverged, None) == ("diverged", diverged["reason"])
    assert outcome.run_status(143, "SIGTERM", diverged, "deadline")[0] == "diverged"
    assert outcome.run_status(0, "SIGTERM", None, None) == ("succeeded", None)  # it finished as the signal came
    assert outcome.run_status(143, "SIGTERM", None, "timeout") == ("timeout", "SIGTERM: the experiment's timeout")
    assert outcome.run_status(3, None, None, None) == ("failed", "exit code 3")


def test_a_diverged_run_exits_non_zero_even_when_its_command_exited_0():
    metrics = {"throughput": {}, F.DIVERGENCE: {"step": 7, "reason": "non-finite loss (inf) at step 7"}}
    doc = outcome.summary_document(experiment="e", node_id="node-0", command=["x"], returncode=0, signal_name=None,
                                  started=0.0, ended=1.0, metrics=metrics, config=None, environ={}, log_tail=[],
                                  results_uri=None)
    assert (doc["status"], doc["exit_code"]) == ("diverged", F.DIVERGED_EXIT_CODE)
    assert doc["error"] == doc["stop_reason"] == metrics[F.DIVERGENCE]["reason"]


@pytest.fixture
def aws(monkeypatch):
    moto = pytest.importorskip("moto")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(key, value)
    with moto.mock_aws():
        import boto3

        yield boto3.client("s3", region_name="us-west-2")


def test_results_are_uploaded_to_s3(tmp_path, aws):
    aws.create_bucket(Bucket="results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "rank-0.jsonl").write_text('{"step": 1}\n')
    code = run_launcher(tmp_path, sys.executable, "-c", "print('hello')",
                        extra=("--results-uri", "s3://results/eksbench/dev/run-1/exp/"))
    assert code == 0
    listed = aws.list_objects_v2(Bucket="results", Prefix="eksbench/dev/run-1/exp/")
    keys = sorted(o["Key"] for o in listed["Contents"])
    assert keys == ["eksbench/dev/run-1/exp/logs/node-0.log", "eksbench/dev/run-1/exp/logs/node-0.log.times",
                    "eksbench/dev/run-1/exp/metrics/rank-0.jsonl", "eksbench/dev/run-1/exp/summary.json"]
    body = aws.get_object(Bucket="results", Key="eksbench/dev/run-1/exp/summary.json")["Body"].read()
    summary = json.loads(body)
    assert summary["status"] == "succeeded" and summary["results_uri"] == "s3://results/eksbench/dev/run-1/exp/"


def test_upload_failure_is_reported_but_keeps_the_training_status(tmp_path, aws, capsys):
    code = run_launcher(tmp_path, sys.executable, "-c", "print('ok')", extra=("--results-uri", "s3://no-such-bucket/x/"))
    assert code == 0
    assert "upload failed: s3://no-such-bucket/x/" in capsys.readouterr().err
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "succeeded"


@pytest.mark.local_run
def test_evaluation_writes_per_class_accuracy_and_uploads_only_eval_json(tmp_path, aws):
    import torch

    from workloads.train.common.cifar import write_standin
    from workloads.train.pytorch.checkpoint import save
    from workloads.train.pytorch.evaluate import main as evaluate
    from workloads.train.pytorch.models import cifar_resnet

    write_standin(tmp_path / "data", train=10, test=30)
    save(tmp_path / "r", {"model": cifar_resnet(width=4).state_dict(), "step": 7, "epoch": 1, "num_classes": 10,
                          "args": {"width_per_group": 4, "precision": "fp32"}})
    aws.create_bucket(Bucket="results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    code = evaluate(["--workload", "cifar10", "--checkpoint", str(tmp_path / "r" / "checkpoints" / "latest.pt"),
                     "--data-dir", str(tmp_path / "data"), "--results-dir", str(tmp_path / "r"),
                     "--results-uri", "s3://results/p/exp/"])
    assert code == 0
    doc = json.loads((tmp_path / "r" / "eval.json").read_text())
    assert doc["samples"] == 30 and doc["step"] == 7 and 0 <= doc["accuracy"] <= 1
    assert set(doc["per_class"]) == {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                                     "truck"}
    keys = [o["Key"] for o in aws.list_objects_v2(Bucket="results")["Contents"]]
    assert keys == ["p/exp/eval.json"]
    assert torch.is_tensor(torch.load(tmp_path / "r" / "checkpoints" / "latest.pt", weights_only=True)["model"]
                           ["0.weight"])


def test_evaluation_without_a_checkpoint_is_a_usage_error(tmp_path, capsys):
    from workloads.train.pytorch.evaluate import main as evaluate

    code = evaluate(["--workload", "cifar10", "--checkpoint", str(tmp_path / "none.pt"), "--data-dir", str(tmp_path),
                     "--results-dir", str(tmp_path)])
    assert code == 2 and "no such file" in capsys.readouterr().err


def test_root_cause_is_the_last_exception_line():
    tail = ["[rank0]: Traceback (most recent call last):", "[rank0]:   File \"x.py\", line 1",
            "[rank0]: FileNotFoundError: no CIFAR-10 data_batch_* files in /d",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "  time : 2026"]
    assert outcome.root_cause(tail) == "FileNotFoundError: no CIFAR-10 data_batch_* files in /d"
    assert outcome.root_cause(["all fine"]) is None


@pytest.mark.local_run
@pytest.mark.parametrize("peer, code", [("succeeded", 0), ("failed", 1)])
def test_stop_with_ends_the_command_when_its_peers_summary_appears(tmp_path, peer, code):
    """paddle's pservers: they serve until the trainers' summary.json is written, then stop, as it says."""
    import threading
    import time

    peers = tmp_path / "trainers" / "summary.json"
    peers.parent.mkdir()
    later = threading.Timer(1.0, lambda: peers.write_text(json.dumps({"status": peer})))
    later.start()
    started = time.monotonic()
    rc = run_launcher(tmp_path / "r", sys.executable, "-c", "import time; time.sleep(120)",
                      extra=["--stop-with", str(peers), "--grace", "5"])
    assert rc == code and time.monotonic() - started < 20
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["status"] == peer and s["stop_reason"] == f"stopped with its peers: {peers} says {peer}"


@pytest.mark.local_run
def test_nothing_the_command_started_outlives_it(tmp_path):
    """A command that leaves a child behind in its process group (as Paddle's pserver left its gloo Manager)."""
    import os
    import time

    pid_file = tmp_path / "left.pid"
    script = ("import os, subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)  # eksbench-left-behind'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    assert run_launcher(tmp_path / "r", sys.executable, "-c", script) == 0
    left = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{left}").exists():
        try:  # reaped by init once killed; a zombie has no cmdline
            if not Path(f"/proc/{left}/cmdline").read_bytes():
                break
        except OSError:
            break
        time.sleep(0.1)
    try:
        alive = b"eksbench-left-behind" in Path(f"/proc/{left}/cmdline").read_bytes()
    except OSError:
        alive = False
    if alive:
        os.kill(left, 9)
    assert not alive, "the command's child outlived the launcher"


def test_summary_names_a_lost_etcd_rendezvous():
    tail = ["Traceback (most recent call last):",
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to etcd has failed. "
            "See inner exception for details."]
    doc = outcome.summary_document(experiment="e", node_id="node-0",
                                  command=["torchrun", "--rdzv-backend=etcd-v2", "--rdzv-endpoint=etcd:2379", "t.py"],
                                  returncode=1, signal_name=None, started=0.0, ended=1.0, metrics={}, config=None,
                                  environ={}, log_tail=tail, results_uri=None)
    assert doc["status"] == "failed"
    assert doc["stop_reason"].startswith("rendezvous lost: etcd at etcd:2379 did not answer")
    assert "backoffLimit" in doc["stop_reason"] and "c10d" in doc["stop_reason"]
