"""`bench plan` takes an allreduce experiment: on the dev stack, and with `fabric: strict` on an EFA group."""

from __future__ import annotations

import copy

import pytest
import yaml

from core.catalog.fabric import FABRIC_EXIT_CODE
from core.config.fields import ConfigError
from core.contract import summary_fields as F
from core.contract.names import ENV_EFA as EFA_ENV
from core.contract.names import ENV_FABRIC as FABRIC_ENV
from program.offline import evaluate_config
from program.stack_files import ROOT

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
P5 = yaml.safe_load((ROOT / "Pulumi.p5-fsx.yaml").read_text())["config"]
P5 = {**P5, "eksbench:cluster": {**P5["eksbench:cluster"], "public_access_cidrs": ["198.18.7.0/32"]}}
TODAY = "2026-11-24"


def with_experiment(config: dict, **experiment) -> dict:
    out = copy.deepcopy(config)
    out["eksbench:experiments"] = [*out["eksbench:experiments"], {"name": "nccl", "workload": "allreduce",
                                                                   "nodes": 2, **experiment}]
    return out


def job_of(plan, experiment: str) -> dict:
    """The experiment's training Job (the Indexed one; its gate and evaluation Jobs carry the label too)."""
    [job] = [r["inputs"] for r in plan.resources if r["type"] == "kubernetes:batch/v1:Job"
             and r["inputs"]["metadata"].get("labels", {}).get("eksbench.io/experiment") == experiment
             and r["inputs"]["spec"].get("completionMode") == "Indexed"]
    return job


def env_of(job: dict) -> dict:
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_plan_dev_accepts_an_allreduce_experiment():
    plan = evaluate_config("dev", with_experiment(DEV, steps=20, args=["--max-bytes=8589934592"]), today=TODAY)
    job = job_of(plan, "nccl")
    script = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
    assert "--workload=allreduce" in script and "--steps=20" in script and "--max-bytes=8589934592" in script
    assert env_of(job)[FABRIC_ENV] == "check" and EFA_ENV not in env_of(job)  # p3.16xlarge: no EFA
    assert {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                 "values": [FABRIC_EXIT_CODE, F.DIVERGED_EXIT_CODE, F.NO_STEPS_EXIT_CODE]}} \
        in job["spec"]["podFailurePolicy"]["rules"]


def test_strict_on_an_efa_group_reaches_the_pods():
    plan = evaluate_config("p5-fsx", with_experiment(P5, fabric="strict"), today=TODAY)
    env = env_of(job_of(plan, "nccl"))
    assert env[FABRIC_ENV] == "strict" and env[EFA_ENV] == "1"


def test_strict_without_efa_and_a_single_process_allreduce_are_named_problems():
    with pytest.raises(ConfigError) as e:
        evaluate_config("dev", with_experiment(DEV, fabric="strict"), today=TODAY)
    assert any(p.startswith('experiments[2].fabric="strict": judges NCCL\'s EFA transport') for p in e.value.problems), \
        e.value.problems
    with pytest.raises(ConfigError) as e:
        evaluate_config("dev", with_experiment(DEV, nodes=1, gpus_per_node=1), today=TODAY)
    assert any(p.startswith('experiments[2].nodes=1: workload "allreduce" times a collective') for p in e.value.problems), \
        e.value.problems
    with pytest.raises(ConfigError) as e:
        evaluate_config("dev", with_experiment(DEV, fabric="loose"), today=TODAY)
    assert any("experiments[2].fabric" in p and "check, strict" in p for p in e.value.problems), e.value.problems


def test_the_local_run_caps_the_messages_and_args_still_win(tmp_path):
    from bench.local.plan import LOCAL_MAX_BYTES, scale_experiment
    from core.config.model import Experiment, LocalRun

    e = Experiment(name="nccl", workload="allreduce", min_nodes=2, max_nodes=2, steps=20)
    local = scale_experiment(e, LocalRun(), results_dir=str(tmp_path), data_dir=str(tmp_path))
    assert local.train.max_bytes == LOCAL_MAX_BYTES and local.train.steps == 20
    assert any("messages up to 16 MiB here" in n for n in local.notes), local.notes
    sized = scale_experiment(Experiment(name="n", workload="allreduce", min_nodes=2, max_nodes=2,
                                        args=("--max-bytes=8589934592", "--seed", "3", "--max-bytes", "64")),
                             LocalRun(), results_dir=str(tmp_path), data_dir=str(tmp_path))
    assert sized.extra_args == ("--seed", "3") and sized.train.max_bytes == LOCAL_MAX_BYTES
    assert any("the cluster's --max-bytes=8589934592 --max-bytes 64 is for its GPUs" in n for n in sized.notes), \
        sized.notes
    other = scale_experiment(Experiment(name="r", workload="resnet50"), LocalRun(), results_dir=str(tmp_path),
                             data_dir=str(tmp_path))
    assert other.train.max_bytes == 2**30  # not a collective: untouched (and not on its command line)


def test_the_set_up_line_of_an_allreduce_speaks_of_message_sizes_not_batches(tmp_path):
    """`bench run fabric --local` introduces the all-reduce by its sizes, iterations and backend; the CPU's
    precision and memory-format notes, meaningless for summing float32 buffers, are left out."""
    from bench.local.plan import scale_experiment, setup_line
    from core.config.model import Experiment, LocalRun
    from workloads.train.common.cpu_choice import CpuFacts

    epyc = CpuFacts(model="AMD EPYC", flags=frozenset({"avx512f", "avx512_bf16"}))
    e = Experiment(name="nccl", workload="allreduce", min_nodes=2, max_nodes=2, steps=20, precision="amp-fp16")
    local = scale_experiment(e, LocalRun(), results_dir=str(tmp_path), data_dir=str(tmp_path), cpu=epyc)
    line = setup_line(local, gpu=False)
    assert line == ("nccl: allreduce, nodes 2 x 1 proc, messages 8 B to 16 MiB (22 sizes), 20 timed iterations per "
                    "size, gloo over loopback, rendezvous etcd-v2"), line
    assert "nccl, rendezvous" in setup_line(local, gpu=True).replace("iterations per size, ", "")
    assert not [n for n in local.notes if "bf16" in n or "channels_last" in n or "fp16" in n], local.notes
    model = scale_experiment(Experiment(name="r", workload="resnet50", precision="amp-fp16"), LocalRun(),
                             results_dir=str(tmp_path), data_dir=str(tmp_path), cpu=epyc)
    assert ", batch 8, bf16, rendezvous" in setup_line(model, gpu=False)  # a model still says its batch and precision
    assert any("amp-fp16 -> bf16" in n for n in model.notes), model.notes


def test_the_local_progress_of_an_allreduce_counts_message_sizes(tmp_path):
    import time

    from bench.local.experiment_run import ExperimentRun
    from bench.local.plan import scale_experiment
    from core.config.model import Experiment, LocalRun

    exp = scale_experiment(Experiment(name="nccl", workload="allreduce", min_nodes=2, max_nodes=2), LocalRun(),
                           results_dir=str(tmp_path), data_dir=str(tmp_path))
    run = ExperimentRun(exp, stack="s", run_id="r", etcd=None, env={}, timeout_s=60)
    run.t0 = time.monotonic()
    assert "message size 0/22" in run.progress_line()  # 8 B .. 16 MiB
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "allreduce.jsonl").write_text('{"bytes": 8}\n{"bytes": 16}\n')
    assert "message size 2/22" in run.progress_line()


def test_the_results_table_shows_an_allreduces_peak_bus_bandwidth_not_steps_0(tmp_path):
    """`bench run fabric --local` ended on a row of `steps 0` and `samples/s -`: the figure it measured was in
    the logs only."""
    import json
    import time

    from bench.local.experiment_run import ExperimentRun
    from bench.local.plan import scale_experiment
    from bench.terminal import results_table
    from core.config.model import Experiment, LocalRun

    exp = scale_experiment(Experiment(name="nccl", workload="allreduce", min_nodes=2, max_nodes=2), LocalRun(),
                           results_dir=str(tmp_path), data_dir=str(tmp_path))
    # what the launcher wrote for `bench run fabric --local` (workloads.train.harness.fabric_check.busbw_summary)
    (tmp_path / "summary.json").write_text(json.dumps({
        "status": "succeeded", "wall_time_s": 7.324, "coverage": {"steps": 0, "duplicate_lines": 0},
        "throughput": {"samples_per_s_total": None, "samples_per_s_per_process": None, "processes": 0},
        "busbw": {"curve": [{"bytes": 8, "time_us": 449.3, "algbw_gbps": 1.8e-05, "busbw_gbps": 1.8e-05},
                            {"bytes": 16777216, "time_us": 13056.8, "algbw_gbps": 1.284945,
                             "busbw_gbps": 1.284945}],
                  "peak_gbps": 1.284945, "peak_at_bytes": 16777216, "at_1gib_gbps": None, "world_size": 2}}))
    run = ExperimentRun(exp, stack="fabric", run_id="r", etcd=None, env={}, timeout_s=60)
    run.t0, run.wall = time.monotonic(), 7.4
    head, _, line = results_table([run.row()]).splitlines()
    cells = dict(zip(["experiment", "status", "nodes x procs", "steps", "samples/s", "per proc", "wall s"],
                     [c.strip() for c in line.split("  ") if c.strip()]))
    assert cells == {"experiment": "nccl", "status": "succeeded", "nodes x procs": "2x1", "steps": "-",
                     "samples/s": "1.28 GB/s busbw", "per proc": "-", "wall s": "7.4"}, line
