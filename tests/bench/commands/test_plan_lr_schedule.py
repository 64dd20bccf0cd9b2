"""The plan shows each experiment's learning rate at full size and its warm-up (workloads.train.common.schedule)."""

from __future__ import annotations

import yaml

from bench.commands.plan import render
from program.offline import evaluate_config
from program.stack_files import ROOT

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]


def test_the_dev_plan_shows_the_resnet_warm_up_and_none_for_cifar():
    plan = evaluate_config("dev", DEV)
    rows = {r["experiment"]: r for r in plan.estimate["lr_schedules"]}
    resnet, cifar = rows["resnet50-synthetic"], rows["cifar10-elastic"]
    assert (resnet["global_batch"], resnet["lr"]) == (4096, 1.6)  # 2 p3.16xlarge x 8 GPUs x 256
    assert "linear warm-up from 0.1 over 5 epochs" in resnet["warmup"] and "Goyal et al. 2017" in resnet["warmup"]
    assert cifar["warmup"] is None
    text = render(plan)
    assert "Learning rate at full size" in text and "cifar10-elastic: global batch 256, lr 0.1, no warm-up" in text


def test_an_explicit_lr_in_args_means_no_warm_up():
    config = {**DEV, "eksbench:experiments": [{**DEV["eksbench:experiments"][0], "args": ["--lr=0.4"]}]}
    (row,) = evaluate_config("dev", config).estimate["lr_schedules"]
    assert row["lr"] == 0.4 and row["warmup"] is None
