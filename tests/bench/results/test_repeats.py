"""Repeats: the Student-t interval against hand computations, a row per repeat from the results layout,
the per-experiment summary of repeats, and the scaling table's published anchor."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.report.figures import labels
from bench.report.scaling_plot import scaling_table
from bench.results import frames as results
from bench.results.confidence import mean_interval, t_cdf, t_quantile
from bench.results.files import ids_for, repeat_for
from tests.bench.conftest import summary, write_experiment

# t(0.975, df) from the printed table (NIST/SEMATECH e-Handbook 1.3.6.7.2, "Critical values of the
# Student's t distribution"), and t(0.995, 3)
PRINTED = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262, 30: 2.042, 100: 1.984}


@pytest.mark.parametrize("df", sorted(PRINTED))
def test_t_quantile_matches_the_printed_table(df):
    assert t_quantile(0.975, df) == pytest.approx(PRINTED[df], abs=5e-4)


def test_t_distribution_edges():
    assert t_quantile(0.995, 3) == pytest.approx(5.841, abs=5e-4)
    assert t_quantile(0.025, 2) == pytest.approx(-4.303, abs=5e-4)
    assert t_cdf(0.0, 7) == pytest.approx(0.5)
    # df = 1 is the Cauchy distribution: CDF(t) = 1/2 + atan(t)/pi
    assert t_cdf(2.0, 1) == pytest.approx(0.5 + math.atan(2.0) / math.pi, abs=1e-12)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_mean_interval_by_hand():
    # 1000, 1100, 1200: mean 1100; s = sqrt((100^2 + 0 + 100^2) / 2) = 100; n = 3, df = 2;
    # half width = t(0.975, 2) x s / sqrt(3) = 4.302653 x 100 / 1.7320508 = 248.4138
    ci = mean_interval([1000, 1100, 1200])
    assert (ci.n, ci.mean, ci.std) == (3, 1100.0, 100.0)
    assert ci.low == pytest.approx(851.586, abs=1e-3) and ci.high == pytest.approx(1348.414, abs=1e-3)
    # 10, 12: mean 11, s = sqrt(2) = 1.41421, df = 1: 12.7062 x 1.41421 / 1.41421 = 12.7062
    two = mean_interval([10, 12])
    assert two.half_width == pytest.approx(12.7062, abs=1e-4)
    one = mean_interval([5.0])
    assert (one.mean, one.std, one.low, one.high) == (5.0, None, None, None)
    with pytest.raises(ValueError):
        mean_interval([])


def test_a_repeat_folder_is_not_an_experiment_name():
    assert ids_for(("results", "dev"), "r1/rn/repeat_2") == ("dev", "r1", "rn")
    assert ids_for(("results", "dev", "r1", "rn", "repeat_3"), "") == ("dev", "r1", "rn")
    assert repeat_for(("results", "dev"), "r1/rn/repeat_2") == 2 and repeat_for(("results",), "dev/r1/rn") == 1
    assert repeat_for((), "dev/r1/repeat_0") == 1  # not a repeat folder: repeats count from 1


def test_each_repeat_is_a_row_and_the_summary_has_their_interval(repeats_tree, tmp_path):
    df = results.load(repeats_tree)
    assert df[["run_id", "experiment", "repeat", "samples_per_s"]].values.tolist() == [
        ["r2", "resnet50-rep", 1, 1000.0], ["r2", "resnet50-rep", 2, 1100.0], ["r2", "resnet50-rep", 3, 1200.0]]
    assert labels(df) == ["resnet50-rep #1", "resnet50-rep #2", "resnet50-rep #3"]
    assert set(results.steps(repeats_tree)["repeat"]) == {1, 2, 3}
    # one repeat read on its own is still that experiment's row
    one = results.load(repeats_tree / "r2" / "resnet50-rep" / "repeat_2")
    assert one[["stack", "run_id", "experiment", "repeat"]].values.tolist() == [["gpu", "r2", "resnet50-rep", 2]]
    # a failed repeat counts as a run, not in the mean
    write_experiment(tmp_path, "gpu/r2/x/repeat_1", summary("x", rate=10.0))
    write_experiment(tmp_path, "gpu/r2/x/repeat_2", summary("x", status="failed", throughput={}))
    write_experiment(tmp_path, "gpu/r2/single", summary("single", rate=7.0))
    stats = results.repeats(results.load(tmp_path / "gpu")).set_index("experiment")
    assert stats.loc["x", ["runs", "succeeded", "samples_per_s_mean"]].tolist() == [2, 1, 10.0]
    assert pd.isna(stats.loc["x", "ci95_low"]) and stats.loc["single", "runs"] == 1
    rep = results.repeats(df).iloc[0]
    assert (rep["runs"], rep["succeeded"], rep["samples_per_s_mean"], rep["samples_per_s_std"]) == (3, 3, 1100, 100)
    assert rep["ci95_low"] == pytest.approx(851.586, abs=1e-3) and rep["ci95_half_width_pct"] == 22.58


def _sweep(tmp_path, *, precision="amp-fp16", instance_type="p4d.24xlarge", gpu="NVIDIA A100-SXM4-40GB"):
    for n, rate in ((1, 1000.0), (2, 1900.0)):
        doc = summary(f"rn-n{n}", nodes=n, rate=rate, instance_type=instance_type,
                      config={"workload": "resnet50", "batch_size": 256, "precision": precision},
                      device={"name": gpu})
        write_experiment(tmp_path, f"{precision}-{instance_type}/r1/rn-n{n}", doc)
    return scaling_table(results.load(tmp_path / f"{precision}-{instance_type}"))


def test_scaling_reads_against_the_anchor_of_its_gpu_and_precision(tmp_path):
    amp = _sweep(tmp_path)
    assert amp["efficiency"].tolist() == [1.0, 0.95] and amp["gpus"].tolist() == [8, 16]
    assert amp["anchor_efficiency"].tolist() == [0.84, 0.84]  # 6.72 / 8, DGX A100 mixed precision
    assert amp["vs_anchor"].tolist() == [round(1 / 0.84, 3), round(0.95 / 0.84, 3)]
    assert "DGX A100 (8x A100 80GB), mixed precision: 1 -> 8 GPUs 6.72x" in amp["anchor"].iloc[0]
    v100 = _sweep(tmp_path, precision="fp32", instance_type="p3.16xlarge", gpu="Tesla V100-SXM2-16GB")
    assert v100["anchor_efficiency"].tolist() == [0.97, 0.97]  # 7.76 / 8, DGX-1 FP32
    h100 = _sweep(tmp_path, instance_type="p5.48xlarge", gpu="NVIDIA H100 80GB HBM3")
    assert h100["anchor"].iloc[0].endswith("(no published row for NVIDIA H100 80GB HBM3)")
    bf16 = _sweep(tmp_path, precision="bf16")
    assert bf16["anchor"].isna().all() and bf16["vs_anchor"].isna().all()


def test_status_lists_each_repeat_locally_and_on_s3(repeats_tree, tmp_path, monkeypatch):
    import shutil

    import boto3
    from moto import mock_aws

    from bench.cloud.observe import s3_runs
    from bench.local.observe import local_runs
    from core.contract.results_location import ResultsLocation

    shutil.copytree(repeats_tree, tmp_path / "gpu")
    repeats_tree = tmp_path / "gpu"  # a copy: the fixture's tree is shared
    write_experiment(tmp_path, "gpu/r2/plain", summary("plain"))
    want = {"r2": {"plain": "succeeded", "resnet50-rep repeat 1": "succeeded", "resnet50-rep repeat 2": "succeeded",
                   "resnet50-rep repeat 3": "succeeded"}}
    assert local_runs(repeats_tree.parent, "gpu") == want
    for k, v in {"AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="res", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for p in repeats_tree.rglob("*"):
            if p.is_file():
                s3.put_object(Bucket="res", Key=f"eksbench/gpu/{p.relative_to(repeats_tree).as_posix()}",
                              Body=p.read_bytes())
        assert s3_runs(ResultsLocation("res", "eksbench", "gpu"), "us-west-2") == want


def test_logs_of_a_repeated_experiment_are_read_per_repeat(tmp_path):
    from bench.local.observe import local_logs

    for k in (1, 2):
        (tmp_path / "rn" / f"repeat_{k}" / "logs").mkdir(parents=True)
        (tmp_path / "rn" / f"repeat_{k}" / "logs" / "node-0.log").write_text(f"hello from {k}\n")
    assert list(local_logs(tmp_path / "rn", False)) == ["repeat_1/node-0: hello from 1", "repeat_2/node-0: hello from 2"]


def test_following_a_repeated_experiment_ends_with_its_last_repeat(tmp_path):
    """A repeated experiment writes a summary.json per repeat and none of its own: following its logs
    ends once the last repeat's is there (it followed forever before)."""
    import threading

    from bench.local.observe import local_logs

    for k in (1, 2):
        (tmp_path / "rn" / f"repeat_{k}" / "logs").mkdir(parents=True)
        (tmp_path / "rn" / f"repeat_{k}" / "logs" / "node-0.log").write_text(f"hello from {k}\n")
        (tmp_path / "rn" / f"repeat_{k}" / "summary.json").write_text("{}")
    got: list[str] = []
    follower = threading.Thread(target=lambda: got.extend(local_logs(tmp_path / "rn", True, repeats=2)), daemon=True)
    follower.start()
    follower.join(10)
    assert not follower.is_alive(), "following the logs did not end after the last repeat's summary"
    assert got == ["repeat_1/node-0: hello from 1", "repeat_2/node-0: hello from 2"]
