"""bench.results.frames: rows from real and fake results trees, failures as rows, warnings not tracebacks, S3."""

from __future__ import annotations

import warnings

import pytest

from bench.results import frames as results
from bench.results import run_frame
from bench.results import run_row
from bench.results.files import experiment_dirs, ids_for
from tests.bench.conftest import rank_lines, summary, write_experiment


def test_pure_row_reads_new_keys_and_prices_the_run():
    doc = summary("a", nodes=2, rate=2000.0, mfu=0.41, throughput={"samples_per_s_total": 2000.0,
                                                                   "samples_per_s_per_process": 125.0})
    r = run_row.row(doc, ids=("s", "r", "a"), by_rank={0: rank_lines(0)}, price=lambda t, region: 10.0)
    assert (r["nodes"], r["gpus_per_node"], r["world_size"]) == (2, 8, 16)
    assert r["gpu"] == "NVIDIA A100-SXM4-40GB" and r["mfu"] == 0.41 and r["framework"] == "pytorch"
    assert r["cost_usd"] == pytest.approx(20.0)  # $10/h x 2 nodes x 1 h
    assert r["usd_per_1k_samples"] == pytest.approx(20.0 / 3600 / 2000 * 1000, rel=1e-3)


def test_p50_p95_come_from_steady_lines_of_the_slowest_rank_unless_the_summary_has_them():
    fast, slow = rank_lines(0, step_time=0.1), rank_lines(1, step_time=1.0)
    r = run_row.row(summary("a"), ids=("s", "r", "a"), by_rank={0: fast, 1: slow})
    steady = sorted(x["step_time_s"] for x in slow if not x["warmup"])
    assert r["step_time_p50_s"] == pytest.approx(steady[len(steady) // 2], rel=0.2)
    assert r["step_time_p95_s"] >= r["step_time_p50_s"] >= 1.0
    given = summary("a", throughput={"step_time_p50_s": 0.25, "step_time_p95_s": 0.5})
    assert run_row.row(given, ids=("s", "r", "a"), by_rank={1: slow})["step_time_p50_s"] == 0.25


def test_catalog_price_and_cpu_runs_have_no_cost_or_mfu():
    assert run_row.instance_price("p4d.24xlarge", "us-west-2") > 0
    assert run_row.instance_price("no-such.type", "us-west-2") is None
    local = summary("a", image=run_row.LOCAL_IMAGE, device=None, instance_type=None, mfu=0.5)
    r = run_row.row(local, ids=("s", "r", "a"))
    assert (r["gpu"], r["cost_usd"], r["mfu"]) == ("cpu", None, None)


def test_ids_and_experiment_dirs_at_any_level():
    keys = ["r1/a/summary.json", "r1/a/metrics/rank-0.jsonl", "r1/b/logs/node-0.log", "r1/b/checkpoint.pt",
            "r1/_data/x.bin"]
    dirs = experiment_dirs(keys)
    assert dirs == {"r1/a": {"summary.json", "metrics/rank-0.jsonl"}, "r1/b": {"logs/node-0.log"}}
    assert ids_for(("results", "dev"), "r1/a") == ("dev", "r1", "a")
    assert ids_for(("results", "dev", "r1", "a"), "") == ("dev", "r1", "a")
    assert experiment_dirs(["summary.json"]) == {"": {"summary.json"}}


def test_fake_tree_loads_at_stack_run_and_experiment_level(scaling_tree):
    whole = results.load(scaling_tree)
    assert set(whole["experiment"]) == {"resnet50-1n", "resnet50-2n", "resnet50-4n", "broken"}
    assert set(whole["stack"]) == {"gpu"} and set(whole["run_id"]) == {"r1"}
    one = results.load(scaling_tree / "r1" / "resnet50-2n")
    assert one[["stack", "run_id", "experiment"]].values.tolist() == [["gpu", "r1", "resnet50-2n"]]
    assert len(results.load(scaling_tree / "r1")) == 4
    assert set(results.COLUMNS) <= set(whole.columns)
    four = whole.set_index("experiment").loc["resnet50-4n"]
    assert four["cost_usd"] == pytest.approx(4 * run_row.instance_price("p4d.24xlarge", "us-west-2"), rel=1e-3)


def test_malformed_summary_warns_with_its_path_and_is_still_a_row(tmp_path):
    write_experiment(tmp_path, "dev/r1/bad", '{"status": "succ', ranks=1)
    with pytest.warns(UserWarning, match=r"bad/summary\.json: not valid JSON"):
        df = results.load(tmp_path / "dev")
    (row,) = df.to_dict("records")
    assert row["status"] == "failed" and row["experiment"] == "bad"
    assert "no summary.json" in row["error"]


def test_failed_runs_are_rows_with_their_root_cause(tmp_path):
    write_experiment(tmp_path, "dev/r1/crashed", summary("crashed", status="failed", error="ValueError: bad lr"))
    d = write_experiment(tmp_path, "dev/r1/killed", None, ranks=1)
    (d / "logs").mkdir()
    (d / "logs" / "node-0.log").write_text("step 3\nTraceback (most recent call last):\n"
                                           "[rank0]: RuntimeError: CUDA out of memory\n")
    df = results.load(tmp_path / "dev").set_index("experiment")
    assert df.loc["crashed", "status"] == "failed" and df.loc["crashed", "error"] == "ValueError: bad lr"
    assert df.loc["killed", "status"] == "failed"
    assert df.loc["killed", "error"] == "RuntimeError: CUDA out of memory"


def test_a_source_that_does_not_exist_raises_one_line_naming_it_and_what_was_looked_for(tmp_path):
    from bench import results as api

    for call in (results.load, results.steps):
        with pytest.raises(FileNotFoundError) as err:
            call(tmp_path / "nope")
        assert str(err.value) == (f"{tmp_path / 'nope'}: no such folder; looked for experiment results "
                                  "(summary.json, metrics/ or logs/) under it")
        assert isinstance(err.value, api.NoResults)
    (tmp_path / "a-file.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"a-file\.json: not a folder; looked for experiment results"):
        results.load(tmp_path / "a-file.json")
    write_experiment(tmp_path, "dev/r1/a", summary("a"), ranks=1)
    with pytest.raises(FileNotFoundError, match="nope"):  # one missing source among good ones
        results.load(tmp_path / "dev", tmp_path / "nope")
    # the readers behind bench report and bench compare still warn: those commands say "nothing loadable"
    with pytest.warns(UserWarning, match="no such directory"):
        assert results.runs(str(tmp_path / "nope")) == []


def test_an_existing_folder_without_experiments_is_an_empty_frame_with_its_dtypes_and_a_warning(tmp_path):
    (tmp_path / "dev" / "r1").mkdir(parents=True)
    with pytest.warns(UserWarning, match="no experiment results found"):
        df = results.load(tmp_path / "dev")
    assert df.empty and list(df.columns) == list(results.COLUMNS + run_frame.EXTRA)
    assert str(df["started_at"].dtype) .startswith("datetime64") and str(df["started_at"].dt.tz) == "UTC"
    assert all(df[c].dtype == "float64" for c in run_frame.MEASURES)


def test_load_gives_utc_times_and_float_numbers_with_nan_for_missing(tmp_path):
    import numpy as np
    import pandas as pd

    write_experiment(tmp_path, "dev/r1/gpu", summary("gpu", nodes=2, mfu=0.4, started_at="2026-01-01T12:30:00Z"))
    # a local CPU run: no price, no MFU; a run that died: no summary at all (no start, no counts)
    write_experiment(tmp_path, "dev/r1/cpu", summary("cpu", image=run_row.LOCAL_IMAGE, device=None, instance_type=None,
                                                     mfu=0.5, started_at="2026-01-01T13:00:00+01:00"))
    write_experiment(tmp_path, "dev/r2/cpu", summary("cpu", image=run_row.LOCAL_IMAGE, device=None, instance_type=None))
    df = results.load(tmp_path / "dev").set_index(["run_id", "experiment"])
    assert df["started_at"].dtype == pd.DatetimeTZDtype(unit=df["started_at"].dt.unit, tz="UTC")
    assert df.loc[("r1", "gpu"), "started_at"] == pd.Timestamp("2026-01-01T12:30:00Z")
    assert df.loc[("r1", "cpu"), "started_at"] == pd.Timestamp("2026-01-01T12:00:00Z")  # the offset read as UTC
    for col in run_frame.MEASURES:
        assert df[col].dtype == np.float64, col
    assert np.isnan(df.loc[("r1", "cpu"), "cost_usd"]) and df.loc[("r1", "gpu"), "cost_usd"] > 0
    assert np.isnan(df.loc[("r1", "cpu"), "mfu"]) and df.loc[("r1", "gpu"), "mfu"] == 0.4
    cpu_only = results.load(tmp_path / "dev" / "r2")  # every value missing: still float64, never object of None
    assert [cpu_only[c].dtype for c in ("cost_usd", "mfu", "hourly_usd")] == [np.float64] * 3
    assert cpu_only[["cost_usd", "mfu", "hourly_usd"]].isna().all().all()
    # counts: int64 when every row has one, float64 with NaN otherwise
    assert all(df[c].dtype == np.int64 for c in ("repeat", "nodes", "gpus_per_node", "world_size", "batch_size"))
    write_experiment(tmp_path, "dev/r3/died", None, ranks=1)
    with_gap = results.load(tmp_path / "dev")
    assert with_gap["batch_size"].dtype == np.float64 and with_gap["batch_size"].isna().sum() == 1
    assert with_gap["started_at"].isna().sum() == 1 and with_gap["repeat"].dtype == np.int64


def test_a_value_of_the_wrong_type_reads_as_missing_with_a_warning(tmp_path):
    import numpy as np
    import pandas as pd

    write_experiment(tmp_path, "dev/r1/odd", summary("odd", mfu="high", wall_time_s=True, started_at="yesterday"))
    with pytest.warns(UserWarning) as caught:
        (row,) = results.load(tmp_path / "dev").to_dict("records")
    said = " | ".join(str(w.message) for w in caught)
    assert "ignored field(s) of the wrong type: wall_time_s, mfu" in said  # the summary's reader
    assert "started_at: 1 value(s) not a time (e.g. 'yesterday'); read as missing" in said
    assert np.isnan(row["mfu"]) and np.isnan(row["wall_s"]) and row["started_at"] is pd.NaT


def test_bad_metrics_lines_warn_without_raising(tmp_path):
    d = write_experiment(tmp_path, "dev/r1/a", summary("a"), ranks=1)
    with open(d / "metrics" / "rank-0.jsonl", "a") as f:
        f.write("garbage\n{\"step\": 99}\n")
    with pytest.warns(UserWarning, match=r"rank-0\.jsonl: skipped 1 malformed line"):
        s = results.steps(tmp_path / "dev")
    assert 99 in set(s["step"])


@pytest.mark.local_run
def test_s3_source_under_moto(scaling_tree, monkeypatch):
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="res", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for p in scaling_tree.rglob("*"):
            if p.is_file():
                s3.put_object(Bucket="res", Key=f"gpu/{p.relative_to(scaling_tree).as_posix()}", Body=p.read_bytes())
        df = results.load("s3://res/gpu")
        assert sorted(df["experiment"]) == ["broken", "resnet50-1n", "resnet50-2n", "resnet50-4n"]
        assert set(df["stack"]) == {"gpu"} and df["results_uri"].str.startswith("s3://res/gpu/r1/").all()
        one = results.load("s3://res/gpu/r1/resnet50-2n/")
        assert one[["stack", "run_id", "experiment"]].values.tolist() == [["gpu", "r1", "resnet50-2n"]]
        assert len(results.steps("s3://res/gpu/r1")) == len(results.steps(scaling_tree))
        with pytest.raises(FileNotFoundError, match=r"^s3://no-such-bucket/x: no such bucket 'no-such-bucket'; "
                                                    r"looked for experiment results \(summary\.json"):
            results.load("s3://no-such-bucket/x")
        with pytest.raises(FileNotFoundError, match=r"^s3://res/gpu/nosuch: no objects under s3://res/gpu/nosuch/; "):
            results.load("s3://res/gpu/nosuch")
        with pytest.raises(FileNotFoundError, match="no objects"):
            results.steps("s3://res/gpu/nosuch")
        s3.put_object(Bucket="res", Key="other/notes.txt", Body=b"x")  # objects, but no experiment: a warning
        with pytest.warns(UserWarning, match="no experiment results found"):
            assert results.load("s3://res/other").empty


@pytest.mark.local_run
def test_real_local_run_loads_as_one_succeeded_cpu_row(real_run):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real run reads cleanly
        df = results.load(real_run / "dev")
        s = results.steps(real_run / "dev" / "t1")
    (r,) = df.to_dict("records")
    assert (r["stack"], r["run_id"], r["experiment"], r["status"]) == ("dev", "t1", "cifar10-elastic", "succeeded")
    assert (r["workload"], r["gpu"]) == ("cifar10", "cpu") and r["cost_usd"] != r["cost_usd"] and r["mfu"] != r["mfu"]
    assert r["samples_per_s"] > 0 and 0 < r["step_time_p50_s"] <= r["step_time_p95_s"]
    assert r["world_size"] == r["nodes"] * r["gpus_per_node"] and 0 <= r["accuracy"] <= 1
    assert set(s["rank"]) == set(range(r["world_size"])) and s["warmup"].any() and (~s["warmup"]).any()
    assert list(s.columns) == list(results.STEP_COLUMNS)


def test_a_cluster_run_that_never_reported_keeps_its_launch_shape():
    """The launcher records the nodes and processes per node it is given beside the command (core.contract.launch_command
    builds both); results read that field, whatever the torchrun flags' spelling."""
    from core.contract.launch_command import launcher_argv
    from tests.workloads.test_launch import ENV, E
    from workloads.launch.pytorch import pytorch_launch
    from workloads.train.harness.launch import build_parser
    from workloads.train.harness.outcome import summary_document

    launch = pytorch_launch(E, ENV, job="j", service="s", gpus=8)
    args = build_parser().parse_args(launcher_argv(python="python3", results_dir="r", launched=launch.launched)[3:]
                                     + ["--", *launch.argv])
    doc = summary_document(experiment="x", node_id="node-0", command=launch.argv, returncode=1, signal_name=None,
                           started=0.0, ended=1.0, metrics={}, config=None, environ={}, log_tail=[],
                           results_uri=None, nodes=args.nodes, procs_per_node=args.procs_per_node)
    r = run_row.row(doc, ids=("s", "r", "x"))
    assert (r["nodes"], r["gpus_per_node"], r["world_size"]) == (2, 8, 16)


def test_a_source_that_cannot_be_listed_raises_saying_why(monkeypatch):
    """No AWS credentials: load raises with the one line that says how to provide them (it once gave an empty
    frame and a warning, which a notebook reads as "no runs")."""
    from bench import results as api

    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    with pytest.raises(api.UnreadableResults, match=r"^s3://some-bucket/dev/r1: no AWS credentials found: set "):
        api.load("s3://some-bucket/dev/r1")
    assert isinstance(api.UnreadableResults("x"), LookupError)  # bench report and compare: one line, exit 2
