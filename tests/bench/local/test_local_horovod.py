"""Horovod locally, for real: ``bench run horovod --local`` (tests/stacks/Pulumi.horovod.yaml) starts two
"nodes" from Horovod's own venv, each the results launcher around ``workloads.train.horovod.bootstrap``
(node 0 serves Horovod's HTTP Gloo rendezvous), which runs ``workloads.train.horovod``. The pure
parts: the processes Horovod's local launch entry gives, and the venv's name and its absence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local import framework_venvs as fv
from bench.local.horovod import horovod_processes, loopback_hosts
from bench.local.launch import LocalContext
from bench.local.plan import scale_experiment
from core.config.model import Experiment, LocalRun
from workloads.train.horovod.bootstrap import horovod_env

ROOT = Path(__file__).resolve().parents[3]
STACKS = ROOT / "tests" / "stacks"
VENV = fv.venv_dir("horovod")
BUILD = ".ci/setup-framework horovod"


def horovod_python() -> str:
    """Horovod's venv python. Skipped only where the set-up never ran (no venv folder at all); a venv
    the set-up left unfinished (a failed build) fails."""
    if not VENV.exists():
        pytest.skip(f"Horovod's venv {VENV} is not built: run `{BUILD}` (.ci/setup-tests does)")
    assert (VENV / fv.COMPLETE).is_file(), f"{BUILD} did not finish; its log: {VENV / 'build.log'}"
    return str(VENV / "bin" / "python")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def local(exp: Experiment, tmp_path: Path):
    return scale_experiment(exp, LocalRun(nodes=2, steps=12, batch_size=4, image_size=32, width_per_group=8),
                            results_dir=str(tmp_path / exp.name), data_dir=str(tmp_path / "_data"))


def context(python: str, port: int) -> LocalContext:
    return LocalContext(launcher_python="py", python=python, endpoint="127.0.0.1:1", rdzv_id="x", ports=lambda: port)


def test_each_node_is_the_launcher_around_the_pods_bootstrap_with_loopback_hosts(tmp_path):
    exp = local(Experiment(name="h", framework="horovod", min_nodes=2, max_nodes=2), tmp_path)
    assert exp.skip is None and exp.rdzv_backend == "horovod-gloo-http"
    procs = horovod_processes(exp, context("/venv/bin/python", 4242))
    assert [p.role for p in procs] == ["node", "node"]
    for n, p in enumerate(procs):
        argv = list(p.argv)
        assert argv[:3] == ["py", "-m", "workloads.train.harness.launch"]  # the launcher runs on bench's python
        # told the shape and the trainer's arguments (never read back from the command)
        assert argv[argv.index("--nodes") + 1] == "2" and argv[argv.index("--procs-per-node") + 1] == "1"
        assert json.loads(argv[argv.index("--train-config") + 1])["workload"] == "resnet50"
        assert argv[argv.index("--node-id") + 1] == f"node-{n}"
        assert argv[argv.index("--summary") + 1] == ("always" if n == 0 else "never")
        after = argv[argv.index("--") + 1:]
        assert after[:5] == ["/venv/bin/python", "-m", "workloads.train.horovod.bootstrap", "/venv/bin/python", "-m"]
        assert after[5] == "workloads.train.horovod" and "--workload=resnet50" in after
        assert p.env["JOB_COMPLETION_INDEX"] == str(n) and p.env["HOROVOD_GLOO_IFACE"] == "lo"
        # What the bootstrap derives from this env is the pods' contract, on loopback addresses.
        hosts = p.env["EKSBENCH_HVD_HOSTS"].split(",")
        derived = horovod_env(hosts=hosts, node=n, local_rank=0, gpus=int(p.env["EKSBENCH_HVD_SLOTS"]),
                              port=int(p.env["EKSBENCH_HVD_PORT"]))
        assert derived["HOROVOD_RANK"] == str(n) and derived["HOROVOD_SIZE"] == "2"
        assert derived["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
        assert derived["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "4242" and derived["HOROVOD_HOSTNAME"] == hosts[n]
    assert loopback_hosts(2) == ["127.0.0.1", "127.0.0.2"]  # two Gloo "hosts", each its own local group


def test_the_venv_name_follows_its_build_hook_and_patch():
    """Horovod's venv is named by its requirements, its build hook and its patch (bench.local.framework_venvs);
    the set-up script asks that module for the name: one computation of it."""
    names = [p.name for p in fv.build_hooks("horovod")]
    assert names == ["horovod-cxx17.patch", "horovod.sh"]
    out = subprocess.run([sys.executable, "-m", "bench.local.framework_venvs", "horovod"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == str(VENV)


def test_without_horovods_venv_the_local_run_says_which_command_builds_it(tmp_path):
    env = child_env()
    env["EKSBENCH_VENVS"] = str(tmp_path / "no-venvs")
    done = subprocess.run([sys.executable, "-m", "bench", "run", "horovod", "--local", "--project-dir", str(STACKS),
                           "--run-id", "v", "--results-root", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: framework horovod runs from a venv of its own") and f"`bash {BUILD}`" in line
    assert not (tmp_path / "horovod" / "v").exists()  # refused before anything was started


@pytest.mark.local_run
def test_bench_run_horovod_local_trains_two_workers_through_the_gloo_rendezvous(tmp_path):
    horovod_python()
    done = subprocess.run([sys.executable, "-m", "bench", "run", "horovod", "--local", "--project-dir", str(STACKS),
                           "--run-id", "t", "--results-root", str(tmp_path)], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rendezvous horovod-gloo-http" in done.stdout and "etcd 127.0.0.1" not in done.stdout
    results = tmp_path / "horovod" / "t" / "resnet50-horovod"
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["exit_code"] == 0
    assert summary["framework"] == "horovod" and summary["world_sizes"] == [2] and summary["nodes"] == 2
    assert summary["coverage"] == {"steps": 30, "duplicate_lines": 0, "missing_steps": []}
    assert set(summary["ranks"]) == {"0", "1"}
    tp = summary["throughput"]
    assert tp["processes"] == 2 and tp["samples_per_s_total"] > 0
    assert 0 < tp["step_time_p50_s"] <= tp["step_time_p95_s"]
    assert summary["flops_per_sample"] > 0 and summary["tflops_per_s"] > 0 and summary["loop_seconds"] > 0
    # The shape and the trainer's arguments the local entry told the launcher (core.contract.launch_command.Launched).
    assert summary["launch"] == {"nodes": 2, "procs_per_node": 1}
    assert summary["config"]["workload"] == "resnet50" and summary["config"]["batch_size"] == 8
    assert summary["device"]["name"] == "cpu" and summary["device"]["torch"]
    logs = {n: (results / "logs" / f"node-{n}.log").read_text() for n in (0, 1)}
    assert "[workloads.train] rank 0/2" in logs[0] and "[workloads.train] rank 1/2" in logs[1], logs
    assert "finished at step 30" in logs[0]


@pytest.mark.local_run
def test_cifar10_trains_with_horovod_on_two_ranks(tmp_path):
    """The other workload Horovod runs: two ranks on the CIFAR-10 stand-in, started as the local runner
    starts them, each writing every step's line, and one summary."""
    python = horovod_python()
    from workloads.train.common.cifar import write_standin

    write_standin(tmp_path / "_data", train=256, test=200)
    exp = local(Experiment(name="c", framework="horovod", workload="cifar10", dataset="cifar10", min_nodes=2,
                           max_nodes=2), tmp_path)
    from bench.local.etcd import free_port

    ctx = LocalContext(launcher_python=sys.executable, python=python, endpoint="127.0.0.1:1", rdzv_id="c",
                       ports=free_port)
    env = child_env()
    env["OMP_NUM_THREADS"] = "1"
    procs = [subprocess.Popen(p.argv, cwd=ROOT, env={**env, **p.env}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
             for p in horovod_processes(exp, ctx)]
    try:
        codes = [p.wait(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = tmp_path / "c"
    assert codes == [0, 0], (results / "logs" / "node-0.log").read_text()
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["framework"] == "horovod"
    assert summary["config"]["workload"] == "cifar10" and summary["world_sizes"] == [2]
    assert summary["coverage"]["steps"] == 12
    from workloads.train.common.metrics import metrics_dir, read_jsonl

    lines = {r: read_jsonl(metrics_dir(results) / f"rank-{r}.jsonl") for r in (0, 1)}
    assert [x["step"] for x in lines[0]] == [x["step"] for x in lines[1]]
    assert all(x["world_size"] == 2 for r in (0, 1) for x in lines[r])
