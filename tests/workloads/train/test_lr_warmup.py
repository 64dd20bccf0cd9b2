"""The large-batch warm-up (workloads.train.common.schedule, Goyal et al. 2017): above a global batch of 1024 the
linear scaling rule's rate is reached linearly over 5 epochs from the rule's 0.1, counted in samples trained,
so an elastic resize neither restarts nor skips it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.contract.train_args import TrainArgs
from workloads.train.common.schedule import (
    WARMUP_EPOCHS,
    default_lr,
    lr_at,
    warmup_note,
    warmup_samples,
)

BIG = TrainArgs(workload="resnet50", batch_size=256)  # x 64 processes: 16,384 images, lr 6.4


def test_64_gpus_of_256_start_at_the_rules_01_not_at_64():
    assert default_lr(BIG, 64) == pytest.approx(6.4)
    assert lr_at(BIG, 64, 0) == pytest.approx(0.1)
    length = warmup_samples(BIG, 64)
    assert length == WARMUP_EPOCHS * 1_281_167  # synthetic data: ImageNet's epoch
    assert lr_at(BIG, 64, 0, samples=length // 2) == pytest.approx((0.1 + 6.4) / 2)
    assert lr_at(BIG, 64, 0, samples=length) == pytest.approx(6.4)


def test_no_warm_up_at_1k_or_below_with_an_explicit_lr_or_for_mask_rcnn():
    assert warmup_samples(BIG, 4) == 0 and lr_at(BIG, 4, 0) == default_lr(BIG, 4)  # 1,024: the rule's own range
    assert warmup_samples(replace(BIG, lr=6.4), 64) == 0 and lr_at(replace(BIG, lr=6.4), 64, 0) == 6.4
    assert warmup_samples(TrainArgs(workload="maskrcnn", batch_size=256), 64) == 0  # its own 1000-step warm-up
    assert warmup_note(BIG, 4) is None


def test_a_dataset_with_a_size_warms_up_over_its_own_epochs():
    cifar = TrainArgs(workload="cifar10", batch_size=512)
    assert warmup_samples(cifar, 4, size=50_000) == 250_000
    assert warmup_samples(cifar, 4, size=1_000) == 5_000  # the local stand-in's epochs, not CIFAR's


def test_after_an_elastic_resize_the_warm_up_goes_on_from_the_samples_trained():
    half = warmup_samples(BIG, 64) // 2
    before = lr_at(BIG, 64, 100, samples=half)
    after = lr_at(BIG, 32, 100, samples=half)  # half the world: half the target rate, same progress
    assert before == pytest.approx(0.1 + (6.4 - 0.1) / 2) and after == pytest.approx(0.1 + (3.2 - 0.1) / 2)


def test_the_plan_says_the_schedule():
    note = warmup_note(BIG, 64)
    assert note.startswith("lr 6.4 (0.1 x 16384/256), linear warm-up from 0.1 over 5 epochs "
                           "(6,405,835 samples, 391 steps")
    assert "Goyal et al. 2017" in note


@pytest.mark.local_run
def test_the_trainer_warms_up_and_checkpoints_the_samples_it_trained(tmp_path, monkeypatch):
    from tests.workloads.train.test_train_timing import TINY, run_in_process
    from workloads.train.common.metrics import read_rank_metrics
    from workloads.train.pytorch import checkpoint as ckpt

    # one process of 1,040 images a step: just above the 1,024 where the warm-up starts
    args = replace(TINY, results_dir=str(tmp_path), batch_size=1040, image_size=16, width_per_group=2, steps=3,
                   log_every=1, warmup_steps=0)
    run_in_process(args, monkeypatch)
    rates = [line["lr"] for line in read_rank_metrics(tmp_path)[0]]  # the rate of each line's step
    assert rates[0] == pytest.approx(0.1) and rates == sorted(set(rates)) and rates[-1] < default_lr(args, 1)
    assert ckpt.load(str(tmp_path / "checkpoints" / "latest.pt"))["samples_seen"] == 3 * 1040
