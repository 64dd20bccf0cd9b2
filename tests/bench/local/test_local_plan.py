"""How ``bench run --local`` scales a stack down, the commands it builds, and its error handling."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bench.local import plan as lr
from bench.terminal import results_table
from core.config.model import Experiment, LocalRun
from core.contract.train_args import parse_train_args
from program.stack_files import load_stack_config
from tests.workloads.conftest import ROOT, child_env
from tests.workloads.test_launch import ENV, E
from tests.workloads.train.test_cpu_choice import EPYC, SPR
from workloads.launch.common import compiles, train_args_for
from workloads.launch.pytorch import pytorch_launch, rdzv_conf


def test_run_id_is_the_given_utc_time():
    assert lr.default_run_id(datetime(2026, 11, 22, 8, 5, 9, tzinfo=timezone.utc)) == "20261122-080509"


@pytest.mark.parametrize("nodes,local,expected", [
    ((2, 2), 2, (2, 2)), ((1, 1), 2, (1, 1)), ((4, 4), 2, (2, 2)),
    ((1, 2), 2, (1, 2)), ((2, 4), 2, (1, 2)), ((3, 4), 2, (1, 2)), ((2, 8), 4, (1, 4)), ((4, 8), 4, (2, 4)),
    ((1, 2), 1, (1, 1)),
])
def test_elastic_ranges_keep_their_shape(nodes, local, expected):
    assert lr.local_node_range(*nodes, local) == expected


def test_dev_stack_scales_to_the_local_section(tmp_path):
    cfg = load_stack_config("dev")
    plan = lr.plan_local(cfg.experiments, cfg.local, run_dir=tmp_path)
    resnet, cifar = plan
    assert (resnet.name, resnet.min_nodes, resnet.max_nodes, resnet.procs_per_node) == ("resnet50-synthetic", 2, 2, 1)
    assert (resnet.train.steps, resnet.train.batch_size, resnet.train.image_size) == (30, 8, 64)
    # amp-fp16 on a CPU with no known bf16 instructions trains in fp32 (tests/workloads/train/test_cpu_choice.py)
    assert resnet.train.width_per_group == 16 and resnet.train.precision == "fp32"
    assert not resnet.train.channels_last and not cifar.train.channels_last
    assert resnet.train.results_dir == str(tmp_path / "resnet50-synthetic")
    assert (cifar.min_nodes, cifar.max_nodes, cifar.elastic, cifar.evaluate) == (1, 2, True, True)
    assert cifar.train.epochs == 0 and cifar.train.steps == 30 and cifar.train.dataset == "cifar10"
    assert cifar.train.checkpoint_every == 10
    assert any("stand-in" in n for n in cifar.notes) and any("20 epochs" in n for n in cifar.notes)


def test_gpu_keeps_fp16_and_other_datasets_become_synthetic(tmp_path):
    exp = Experiment(name="x", dataset="imagenet", precision="amp-fp16", steps=5, checkpoint_every=50)
    le = lr.scale_experiment(exp, LocalRun(), results_dir="r", data_dir="d", gpu=True)
    assert le.train.precision == "amp-fp16" and le.train.dataset == "synthetic" and le.train.steps == 5
    assert le.train.checkpoint_every == 1


def test_local_train_args_are_the_clusters_scaled_down(tmp_path):
    from dataclasses import replace

    from workloads.launch.common import train_args_for

    exp = Experiment(name="m", workload="maskrcnn", dataset="coco2017", compile=True, channels_last=False, steps=12)
    le = lr.scale_experiment(exp, LocalRun(), results_dir="/r/m", data_dir="/r/_data")
    cluster = train_args_for(exp, lr.LocalPaths(datasets_dir="/r/_data", results_dir="/r/m"))
    scaled = {"batch_size", "precision", "steps", "dataset", "checkpoint_every", "checkpoint_minutes", "image_size",
              "width_per_group", "warmup_steps", "workers", "collective_timeout", "log_every"}
    assert le.train == replace(cluster, **{k: getattr(le.train, k) for k in scaled})
    assert (le.train.workers, le.train.collective_timeout, le.train.seed, le.train.warmup_steps) == (0, 120, 0, 2)
    assert (le.train.log_every, le.train.checkpoint_every, le.train.checkpoint_minutes) == (1, 4, 0.0)
    assert (le.train.compile, le.train.channels_last, le.train.workload) == (True, False, "maskrcnn")


def test_evaluate_command_is_the_clusters_on_local_paths(tmp_path):
    from workloads.launch.common import evaluation_argv

    le = lr.scale_experiment(Experiment(name="c", workload="cifar10", dataset="cifar10", evaluate=True), LocalRun(),
                             results_dir=str(tmp_path / "c"), data_dir=str(tmp_path / "_data"))
    cmd = lr.evaluate_command(le, python="py")
    assert cmd == ["py", *evaluation_argv("cifar10", results_dir=str(tmp_path / "c"), data_dir=str(tmp_path / "_data"))]
    assert cmd[cmd.index("--checkpoint") + 1] == str(tmp_path / "c" / "checkpoints" / "latest.pt")
    assert cmd[cmd.index("--results-dir") + 1] == str(lr.evaluation_dir(le))


def test_frameworks_without_a_local_launcher_are_skipped_with_a_reason():
    """Every framework the stack accepts has an entry in bench.local.launch.LOCAL_LAUNCHES; a name
    without one (a retired framework's) is skipped, saying which frameworks run locally."""
    from bench.local.launch import LOCAL_LAUNCHES
    from core.config.model import RETIRED_FRAMEWORKS, choices_of

    assert set(LOCAL_LAUNCHES) == set(choices_of(Experiment, "framework"))
    [retired] = list(RETIRED_FRAMEWORKS)[:1]
    le = lr.scale_experiment(Experiment(name="p", framework=retired), LocalRun(), results_dir="r", data_dir="d")
    assert "no local launch" in le.skip and "horovod" in le.skip


def test_node_commands_wrap_torchrun_in_the_launcher():
    le = lr.scale_experiment(Experiment(name="e", min_nodes=1, max_nodes=2, args=("--lr", "0.2")), LocalRun(),
                             results_dir="/r/e", data_dir="/r/_data")
    cmd = lr.node_command(le, 1, python="py", endpoint="127.0.0.1:5", rdzv_id="dev-1-e")
    sep = cmd.index("--")
    assert cmd[:3] == ["py", "-m", "workloads.train.harness.launch"]
    assert cmd[cmd.index("--node-id") + 1] == "node-1" and cmd[cmd.index("--summary") + 1] == "never"
    torchrun = cmd[sep + 1:]
    # torchrun's flags as core.contract.launch_command spells them, for the cluster and the local run alike
    for flag in ("--nnodes=1:2", "--nproc_per_node=1", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=127.0.0.1:5",
                 "--rdzv_id=dev-1-e", "--max_restarts=3"):
        assert flag in torchrun
    train = torchrun[torchrun.index("workloads.train.pytorch") + 1:]
    assert train[-2:] == ["--lr", "0.2"]
    assert parse_train_args(train).lr == 0.2


def test_without_etcd_the_rendezvous_falls_back_to_c10d():
    le = lr.scale_experiment(Experiment(name="e"), LocalRun(), results_dir="r", data_dir="d")
    assert lr.with_rendezvous(le, etcd_available=True).rdzv_backend == "etcd-v2"
    fallback = lr.with_rendezvous(le, etcd_available=False)
    assert fallback.rdzv_backend == "c10d" and "c10d" in fallback.notes[-1]


def test_execution_mode_is_sequential_when_cores_are_short():
    plan = [lr.scale_experiment(Experiment(name=n, min_nodes=2, max_nodes=2), LocalRun(), results_dir="r",
                                data_dir="d") for n in ("a", "b")]
    mode, why = lr.execution_mode("parallel", 2, plan)
    assert mode == "sequential" and "2 CPU cores for 4 processes" in why
    assert lr.execution_mode("parallel", 8, plan)[0] == "parallel"
    assert lr.execution_mode("sequential", 8, plan)[0] == "sequential"


def test_results_table_lines_up():
    table = results_table([{"experiment": "a", "status": "succeeded", "shape": "2x1", "steps": 30, "total": 1.5,
                               "per_process": 0.75, "wall": 12.0, "path": "results/x/a"},
                              {"experiment": "long-name", "status": "skipped"}])
    head, rule, a, b = table.splitlines()
    assert head.startswith("experiment") and set(rule) <= {"-", " "}
    assert a.index("succeeded") == b.index("skipped") == head.index("status")


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "run", *args], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=60)


def test_config_errors_exit_2_without_traceback():
    done = run_bench("no-such-stack", "--local")
    assert done.returncode == 2
    assert done.stderr.startswith("error: stack=") and "Traceback" not in done.stderr
    assert "dev" in done.stderr


def test_unknown_experiment_and_missing_local_flag_are_usage_errors():
    assert run_bench("dev", "--local", "--experiment", "nope").returncode == 2
    assert run_bench("dev").returncode == 2


def test_dry_run_prints_the_plan_and_commands(tmp_path):
    done = run_bench("dev", "--local", "--dry-run", "--run-id", "x", "--results-root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    # The dev stack runs its experiments one after another (execution: sequential).
    assert "2 experiment(s), sequential (stack setting)" in done.stdout
    assert done.stdout.count("-m workloads.train.harness.launch") == 4
    assert not Path(tmp_path, "dev").exists()


@pytest.mark.parametrize("facts,precision", [(EPYC, "fp32"), (SPR, "bf16")])
def test_the_local_plan_applies_the_choice_and_says_why(facts, precision):
    exp = Experiment(name="r", workload="resnet50", precision="amp-fp16")
    le = lr.scale_experiment(exp, LocalRun(), results_dir="r", data_dir="d", cpu=facts)
    assert (le.train.precision, le.train.channels_last) == (precision, False)
    assert any("amp-fp16 -> " + precision in n for n in le.notes)
    on_gpu = lr.scale_experiment(exp, LocalRun(), results_dir="r", data_dir="d", gpu=True, cpu=facts)
    assert (on_gpu.train.precision, on_gpu.train.channels_last) == ("amp-fp16", True)


def test_cluster_torchrun_has_the_local_runs_rendezvous_settings():
    from bench.local.plan import LocalExperiment, torchrun_command
    from core.contract.train_args import TrainArgs

    local = torchrun_command(LocalExperiment(name="x", workload="resnet50", min_nodes=1, max_nodes=2,
                                             procs_per_node=1, train=TrainArgs(), extra_args=(), rdzv_backend="c10d",
                                             max_restarts=1, evaluate=False, results_dir="r"),
                             python="python", endpoint="127.0.0.1:1", rdzv_id="x")
    assert f"--rdzv_conf={rdzv_conf()}" in local  # spelled by core.contract.launch_command, as on the cluster


def test_the_cluster_and_the_local_run_build_torchrun_with_one_builder():
    """Same flags, same spelling, same order: only the program and the local-only flags differ."""
    from bench.local.plan import scale_experiment, torchrun_command
    from core.config.model import LocalRun

    e = replace(E, min_nodes=1, max_nodes=2)
    cluster = pytorch_launch(e, ENV, job="j", service="s", gpus=1).argv
    local = torchrun_command(scale_experiment(e, LocalRun(), results_dir="r", data_dir="d"), python="py",
                             endpoint="127.0.0.1:1", rdzv_id="j")

    def torchrun_flags(argv):
        trainer = argv.index("workloads.train.pytorch")
        return [a.split("=", 1)[0] for a in argv[:trainer] if a.startswith("--")]
    assert torchrun_flags(local) == torchrun_flags(cluster) + ["--local_addr", "--monitor_interval"]
    assert local[:3] == ["py", "-m", "torch.distributed.run"] and cluster[0] == "torchrun"


def test_a_local_cpu_run_compiles_only_when_the_stack_file_says_so():
    """The GPU default compiles a long synthetic run on the cluster; on this CPU it stays eager (Inductor takes
    minutes here), unless the stack file asks."""
    long = Experiment(name="r", steps=100_000, batch_size=256)
    assert compiles(long)
    assert lr.scale_experiment(long, LocalRun(), results_dir="/r/r", data_dir="/r/_data").train.compile is False
    asked = lr.scale_experiment(replace(long, compile=True), LocalRun(), results_dir="/r/r", data_dir="/r/_data")
    assert asked.train.compile is True


def test_a_local_cpu_run_decodes_with_pillow_unless_the_stack_file_says_otherwise():
    """The cluster's ImageFolder runs decode with DALI on their GPUs; a CPU run uses Pillow (DALI is not among
    the local run's packages), unless the stack file asks for a path."""
    images = Experiment(name="r", dataset="imagenet", steps=10)
    assert train_args_for(images, ENV).input_path == "dali"
    assert lr.scale_experiment(images, LocalRun(), results_dir="/r/r", data_dir="/r/_data").train.input_path == "pillow"
    on_gpu = lr.scale_experiment(images, LocalRun(), results_dir="/r/r", data_dir="/r/_data", gpu=True)
    assert on_gpu.train.input_path == "dali"
    asked = lr.scale_experiment(replace(images, input_path="nvjpeg"), LocalRun(), results_dir="/r/r",
                                data_dir="/r/_data")
    assert asked.train.input_path == "nvjpeg"
