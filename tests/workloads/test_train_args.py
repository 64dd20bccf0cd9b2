"""The training command line is the contract the cluster Jobs call: it must parse and round-trip."""

from __future__ import annotations

import pytest

from core.contract.train_args import TrainArgs, parse_train_args, train_args_to_argv
from workloads.train.common.schedule import default_lr, dist_env


def test_contract_flags_parse():
    a = parse_train_args(["--workload", "cifar10", "--batch-size", "128", "--precision", "bf16", "--steps", "7",
                          "--epochs", "3", "--dataset", "cifar10", "--data-dir", "/data/datasets",
                          "--results-dir", "/data/results/r1/x", "--checkpoint-every", "100", "--image-size", "32",
                          "--width-per-group", "16", "--no-channels-last", "--compile", "--warmup-steps", "4",
                          "--seed", "9", "--target-accuracy", "0.9"])
    assert a == TrainArgs(workload="cifar10", batch_size=128, precision="bf16", steps=7, epochs=3, dataset="cifar10",
                          data_dir="/data/datasets", results_dir="/data/results/r1/x", checkpoint_every=100,
                          image_size=32, width_per_group=16, channels_last=False, compile=True, warmup_steps=4,
                          seed=9, target_accuracy=0.9)
    assert a.by_epochs


@pytest.mark.parametrize("args", [
    TrainArgs(),
    TrainArgs(workload="maskrcnn", precision="amp-fp16", compile=True, channels_last=False, lr=0.01, log_every=5,
              workers=0, collective_timeout=60, harness=False, target_accuracy=0.5),
])
def test_argv_round_trips(args):
    assert parse_train_args(train_args_to_argv(args)) == args


@pytest.mark.parametrize("bad", [["--batch-size", "0"], ["--precision", "fp4"], ["--workload", "bert"],
                                 ["--epochs", "-1"], ["--steps", "x"]])
def test_bad_values_exit_with_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as e:
        parse_train_args(bad)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_distributed_environment_and_lr():
    assert dist_env({}) == {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0}
    env = dist_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2"})
    assert env == {"rank": 3, "world_size": 4, "local_rank": 1, "restart": 2}
    assert default_lr(TrainArgs(batch_size=64), 4) == pytest.approx(0.1)
    assert default_lr(TrainArgs(workload="maskrcnn", batch_size=2), 8) == pytest.approx(0.02)
    assert default_lr(TrainArgs(lr=0.5), 8) == 0.5
