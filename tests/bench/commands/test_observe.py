"""``bench status`` and ``bench logs`` ask the lifecycle's backends (``status``, ``logs``) and print.

Without the Pulumi CLI (every call to it fails here), the AWS backend has no state, no outputs and no
S3 location, so what is found comes from the local backend: the runs under the results root, and an
experiment's node logs, latest run or a given one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cloud import pulumi_cli
from bench.commands import observe
from bench.local.backend import LocalBackend
from bench.results.overview import by_run
from program.stack_files import ROOT

EXPERIMENT = "resnet50-synthetic"  # an experiment of Pulumi.dev.yaml


@pytest.fixture(autouse=True)
def no_pulumi(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("the Pulumi CLI is not on PATH")

    for name in ("open_stack", "outputs", "stack_outputs"):
        monkeypatch.setattr(pulumi_cli, name, fail)


def node_logs(results: Path, run_id: str, lines: dict[str, str], summary: str | None = None) -> Path:
    exp = results / "dev" / run_id / EXPERIMENT
    (exp / "logs").mkdir(parents=True)
    for node, text in lines.items():
        (exp / "logs" / f"{node}.log").write_text(text)
    if summary is not None:
        (exp / "summary.json").write_text(summary)
    return exp


def test_the_local_backend_lists_runs_and_reads_logs(tmp_path):
    node_logs(tmp_path, "r1", {"node-0": "a\nb\n", "node-1": "c\n"}, summary='{"status": "failed"}')
    node_logs(tmp_path, "r2", {"node-0": "new\n"})
    local = LocalBackend(stack="dev", results_root=tmp_path)
    assert by_run(local.status()["rows"]) == {"r1": {EXPERIMENT: "failed"}, "r2": {
        EXPERIMENT: "no summary (running, or stopped before its launcher finished)"}}
    assert list(local.logs(EXPERIMENT, run_id="r1")) == ["node-0: a", "node-0: b", "node-1: c"]
    with pytest.raises(ValueError, match="^run r2 of stack dev has no experiment 'absent'; its experiments: "
                                         f"{EXPERIMENT}$"):
        local.logs("absent")
    with pytest.raises(FileNotFoundError, match=f"^no run r3 under {tmp_path / 'dev'}$"):
        local.logs(EXPERIMENT, run_id="r3")


def test_status_asks_both_backends(tmp_path):
    node_logs(tmp_path, "r1", {"node-0": "x\n"}, summary='{"status": "succeeded"}')
    st = observe.stack_status("dev", ROOT, tmp_path, cloud=True)
    assert st["local_runs"] == {"r1": {EXPERIMENT: "succeeded"}} and st["s3_runs"] == {} and st["state"] is None
    assert st["notes"][0] == "stack state unknown: the Pulumi CLI is not on PATH"
    assert st["notes"][1].startswith("no S3 results location known")
    assert "s3_prefix" not in st
    table = observe.render_status(st).split("\n\n", 1)[1].splitlines()
    assert table[0].split() == ["RUN", "EXPERIMENT", "STATUS", "STARTED", "(UTC)", "DURATION", "THROUGHPUT", "RESULTS"]
    assert table[2].split()[:3] == ["r1", EXPERIMENT, "succeeded"]


def test_logs_come_from_the_first_backend_that_has_them_else_say_where_each_looked(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        observe.experiment_logs("dev", EXPERIMENT, root=ROOT, results_root=tmp_path)
    assert str(e.value) == f"no logs for dev/{EXPERIMENT}: not in the cluster, not on S3, not under {tmp_path / 'dev'}"
    node_logs(tmp_path, "r1", {"node-0": "the run\n"})
    assert list(observe.experiment_logs("dev", EXPERIMENT, root=ROOT, results_root=tmp_path)) == ["node-0: the run"]
    with pytest.raises(ValueError, match="^no experiment 'nope' in stack dev; experiments: resnet50-synthetic, "
                                         "cifar10-elastic"):
        observe.experiment_logs("dev", "nope", root=ROOT, results_root=tmp_path)


def status(capsys, results: Path, *extra: str) -> tuple[int, str, str]:
    from bench.cli import main

    code = main(["status", "dev", "--project-dir", str(ROOT), "--results-root", str(results), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def summaries(results: Path) -> None:
    """Three runs whose names sort against their start times, an all-reduce, a failure and a broken summary."""
    import json

    from tests.bench.conftest import summary

    def put(run: str, exp: str, doc) -> None:
        d = results / "dev" / run / exp
        d.mkdir(parents=True)
        (d / "summary.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))

    put("b-first", EXPERIMENT, summary(EXPERIMENT, rate=100.8, wall_time_s=83.2, started_at="2026-01-01T00:00:00Z"))
    put("b-first", "nccl-allreduce", summary(
        "nccl-allreduce", rate=0, wall_time_s=7.3, started_at="2026-01-01T00:02:00Z", coverage={"steps": 0},
        throughput={"samples_per_s_total": None}, busbw={"peak_gbps": 1.284945, "peak_at_bytes": 16777216,
                                                         "curve": [{"bytes": 8}, {"bytes": 16}]}))
    put("a-second", EXPERIMENT, summary(EXPERIMENT, status="failed", started_at="2026-01-02T10:00:00+00:00",
                                        wall_time_s=4000, stop_reason="exit code 1",
                                        error="RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"))
    put("0-third", EXPERIMENT, "[1, 2]")  # no start: after the others


def test_status_is_a_table_of_runs_oldest_first_with_why_when_how_long_how_fast_and_where(tmp_path, capsys):
    """Before: run ids sorted by name, one status word per experiment, nothing else."""
    summaries(tmp_path)
    code, out, err = status(capsys, tmp_path)
    assert code == 0 and "Traceback" not in err
    rows = [" ".join(r.split()) for r in out.split("\n\n", 1)[1].splitlines()[2:]]  # cells one space apart
    assert [r.split()[:2] for r in rows] == [["b-first", EXPERIMENT], ["b-first", "nccl-allreduce"],
                                             ["a-second", EXPERIMENT], ["0-third", EXPERIMENT]]
    assert "succeeded 2026-01-01 00:00:00 1m 23s 100.8 samples/s" in rows[0]
    assert "7.3s 1.28 GB/s busbw" in rows[1]
    assert f"{tmp_path / 'dev' / 'b-first' / 'nccl-allreduce'}" in rows[1]
    assert "failed (exit code 1: RuntimeError: CUDA out of memory.…) 2026-01-02 10:00:00 1h 06m" in rows[2]
    assert "unknown (summary.json unreadable or without a status)" in rows[3]
    assert "warning:" in err and "0-third" in err


def test_status_json_is_the_same_rows_as_one_document(tmp_path, capsys):
    import json

    summaries(tmp_path)
    code, out, _ = status(capsys, tmp_path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["stack"] == "dev" and doc["state"] is None and "outputs" not in doc
    first, allreduce, failed, broken = doc["runs"]
    assert (first["run"], first["samples_per_s"], first["wall_s"], first["started_at"]) == (
        "b-first", 100.8, 83.2, "2026-01-01T00:00:00Z")
    assert (allreduce["busbw_peak_gbps"], allreduce["busbw_peak_at_bytes"], allreduce["message_sizes"],
            allreduce["steps"], allreduce["samples_per_s"]) == (1.284945, 16777216, 2, None, None)
    assert failed["error"].startswith("RuntimeError: CUDA out of memory") and failed["stop_reason"] == "exit code 1"
    assert broken["status"] == "unknown" and broken["local"] == str(tmp_path / "dev" / "0-third" / EXPERIMENT)


def test_logs_tail_and_node(tmp_path, capsys):
    """``--tail N``: each node's last N lines; ``--node K``: one node's log; a node with none: its names."""
    from bench.cli import main

    node_logs(tmp_path, "r1", {"node-0": "".join(f"zero {i}\n" for i in range(5)), "node-1": "one 0\none 1"})
    common = ["--project-dir", str(ROOT), "--results-root", str(tmp_path)]
    assert main(["logs", "dev", EXPERIMENT, "--tail", "2", *common]) == 0
    assert capsys.readouterr().out.splitlines() == ["node-0: zero 3", "node-0: zero 4", "node-1: one 0",
                                                    "node-1: one 1"]
    assert main(["logs", "dev", EXPERIMENT, "--node", "1", "--tail", "1", *common]) == 0
    assert capsys.readouterr().out.splitlines() == ["node-1: one 1"]
    assert main(["logs", "dev", EXPERIMENT, "--node", "node-0", "--tail", "0", *common]) == 0
    assert capsys.readouterr().out == ""
    assert main(["logs", "dev", EXPERIMENT, "--node", "7", *common]) == 2
    assert capsys.readouterr().err == (f"error: no node 'node-7' in the logs of {EXPERIMENT}; "
                                       "nodes: node-0, node-1\n")
    assert main(["logs", "dev", "resnet50", *common]) == 2
    assert capsys.readouterr().err.startswith("error: no experiment 'resnet50' in stack dev; experiments: "
                                              "resnet50-synthetic, cifar10-elastic")


def test_tail_finds_the_last_lines_across_chunks_without_reading_the_whole_log(tmp_path, monkeypatch):
    from bench.local.observe import local_logs
    from bench.results import node_logs

    monkeypatch.setattr(node_logs, "LINE_CHUNK", 3)  # lines cross every chunk boundary
    exp = tmp_path / "e"
    (exp / "logs").mkdir(parents=True)
    (exp / "logs" / "node-0.log").write_text("first\nsecond line\n\nfourth\nlast, no newline")
    (exp / "summary.json").write_text("{}")  # ended: --follow reads once and stops
    for tail, want in ((1, ["last, no newline"]), (3, ["", "fourth", "last, no newline"]),
                       (9, ["first", "second line", "", "fourth", "last, no newline"])):
        got = [line.split(": ", 1)[1] if ": " in line else "" for line in local_logs(exp, True, tail=tail)]
        assert got == want, tail


def test_logs_timestamps_come_from_the_times_the_launcher_recorded(tmp_path, capsys):
    """``--timestamps``: each line's time from ``<log>.times`` (offset, epoch seconds), joined by offset; an entry
    that is not two numbers, or a line without one (a run from before the launcher recorded them), gives '-'."""
    from bench.cli import main

    exp = node_logs(tmp_path, "r1", {"node-0": "a\nb\nc\n", "node-1": "old run\n"})
    (exp / "logs" / "node-0.log.times").write_text("0 1764236000.0\nnonsense\n3 nan\n4 1764236001.5\n99 1.0\n")
    common = ["--project-dir", str(ROOT), "--results-root", str(tmp_path)]
    assert main(["logs", "dev", EXPERIMENT, "--timestamps", *common]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "node-0: 2025-11-27T09:33:20.000Z a", "node-0: -                        b",
        "node-0: 2025-11-27T09:33:21.500Z c", "node-1: -                        old run"]
    assert main(["logs", "dev", EXPERIMENT, "-t", "--tail", "1", "--node", "0", *common]) == 0
    assert capsys.readouterr().out == "node-0: 2025-11-27T09:33:21.500Z c\n"


def test_following_a_log_dates_the_lines_written_after_it_started(tmp_path):
    """``--follow --timestamps`` reads the times file again as it grows, from where it left off."""
    from bench.results.node_logs import LineTimes

    times = tmp_path / "node-0.log.times"
    times.write_text("0 1764236000.0\n6 17642")  # the writer is half-way through its second entry

    def open_at(pos):
        data = times.read_bytes()[pos:]
        return iter([data[i:i + 4] for i in range(0, len(data), 4)])

    dated = LineTimes(open_at, again=True)
    assert dated.at(0) == 1764236000.0 and dated.at(6) is None
    times.write_text("0 1764236000.0\n6 1764236002.0\n12 1764236003.0\n")
    assert dated.at(6) == 1764236002.0 and dated.at(12) == 1764236003.0


def run_folder(results: Path, run: str, exps: dict[str, str | None], age: int) -> None:
    """A run's experiments, each with a node log (its text) or none (None), the run ``age`` seconds old."""
    import os
    import time

    for exp, text in exps.items():
        (results / "dev" / run / exp / "logs").mkdir(parents=True)
        if text is not None:
            (results / "dev" / run / exp / "logs" / "node-0.log").write_text(text)
    os.utime(results / "dev" / run, (time.time() - age, time.time() - age))


def logs(capsys, results: Path, *args: str) -> tuple[int, str, str]:
    from bench.cli import main

    code = main(["logs", *args, "--project-dir", str(ROOT), "--results-root", str(results)])
    out, err = capsys.readouterr()
    return code, out, err


def test_logs_of_an_experiment_the_run_lacks_says_so_naming_its_experiments(tmp_path, capsys):
    """Before: the latest run without the experiment gave an older run's logs, or, where its folder held no log,
    nothing, and exit 0."""
    run_folder(tmp_path, "r1", {EXPERIMENT: "old\n"}, age=600)
    run_folder(tmp_path, "r2", {"cifar10-elastic": "new\n"}, age=0)
    run_folder(tmp_path, "r3", {EXPERIMENT: None, "cifar10-elastic": "x\n"}, age=300)
    lacks = "error: run r2 of stack dev has no experiment 'resnet50-synthetic'; its experiments: cifar10-elastic"
    for args in ([EXPERIMENT], [f"dev/r2/{EXPERIMENT}"], ["dev/r2", EXPERIMENT], [EXPERIMENT, "--run-id", "r2"]):
        code, out, err = logs(capsys, tmp_path, *(["dev"] if not args[0].startswith("dev") else []), *args)
        assert (code, out, err.strip()) == (2, "", lacks), args
    code, out, err = logs(capsys, tmp_path, f"dev/r3/{EXPERIMENT}")
    assert (code, out) == (2, "") and err.strip() == (
        "error: run r3 of stack dev: experiment 'resnet50-synthetic' has no node logs (it never started, or stopped "
        "before its launcher wrote one)")
    assert logs(capsys, tmp_path, f"dev/r1/{EXPERIMENT}")[:2] == (0, "node-0: old\n")
    code, _, err = logs(capsys, tmp_path, f"dev/r1/{EXPERIMENT}", "cifar10-elastic")
    assert code == 2 and "names experiment 'resnet50-synthetic' and the command line experiment" in err
    code, _, err = logs(capsys, tmp_path, "dev/r1")
    assert code == 2 and err.startswith("error: which experiment of dev/r1? name one (resnet50-synthetic, ")


def test_status_of_a_run_handle_shows_that_run_or_experiment(tmp_path, capsys):
    summaries(tmp_path)
    code, out, _ = status(capsys, tmp_path)
    assert code == 0
    for handle, rows in (("dev/b-first", [["b-first", EXPERIMENT], ["b-first", "nccl-allreduce"]]),
                         ("dev/b-first/nccl-allreduce", [["b-first", "nccl-allreduce"]])):
        from bench.cli import main

        assert main(["status", handle, "--project-dir", str(ROOT), "--results-root", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert [r.split()[:2] for r in out.split("\n\n", 1)[1].splitlines()[2:]] == rows
    assert main(["status", "dev/nope", "--project-dir", str(ROOT), "--results-root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == ("error: stack dev has no run 'nope'; its runs: b-first, a-second, "
                                               "0-third")
    assert main(["status", "dev/a-second/x", "--project-dir", str(ROOT), "--results-root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == ("error: run a-second of stack dev has no experiment 'x'; its "
                                               f"experiments: {EXPERIMENT}")


def test_status_asks_pulumi_and_s3_only_where_the_stack_was_deployed_or_when_told(tmp_path, capsys):
    """Before: every status on a machine without Pulumi or AWS said 'stack state unknown: the Pulumi CLI is not
    on PATH' and 'no S3 results location known'."""
    import shutil

    from bench.cli import main

    project, results = tmp_path / "proj", tmp_path / "results"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, project / name)
    node_logs(results, "r1", {"node-0": "x\n"}, summary='{"status": "succeeded"}')

    def said(*extra: str) -> str:
        assert main(["status", "dev", "--project-dir", str(project), "--results-root", str(results), *extra]) == 0
        return capsys.readouterr().out

    quiet = said()
    assert "Pulumi" not in quiet and "S3" not in quiet and quiet.splitlines()[:2] == ["stack dev", ""]
    assert "stack state unknown: the Pulumi CLI is not on PATH" in said("--cloud")
    (results / "dev" / "r1" / "timeline.json").write_text("{}")  # a cloud run's record, copied home
    assert "no S3 results location known" in said()
    (results / "dev" / "r1" / "timeline.json").unlink()
    (project / ".eksbench" / "work" / "dev").mkdir(parents=True)  # eksbench drove Pulumi for it from here
    assert "stack state unknown" in said()
    assert said("--json").count('"cloud": true') == 1


def test_a_status_cell_is_cut_at_a_word_and_shows_what_the_run_is_flagged_with():
    """Before: ``interrupted (SIGTERM: an interrupt (Ctrl-C, or the run stopp…``, cut mid-word."""
    from bench.terminal import shorten

    assert shorten("short enough", 12) == "short enough"
    assert shorten("SIGTERM: an interrupt (Ctrl-C, or the run stopping)", 30) == "SIGTERM: an interrupt (Ctrl-C…"
    assert shorten("a-single-word-longer-than-the-width", 10) == "a-single…"
    assert shorten("onewordlongerthanthewidth", 10) == "onewordlo…"
    cell = observe.status_cell({"status": "interrupted",
                                "stop_reason": "SIGTERM: from outside (a Job's deadline, a node drain, a deletion)"})
    assert cell == "interrupted (SIGTERM: from outside (a Job's deadline, a node…)"
    assert len(cell) <= len("interrupted () ") + observe.WHY_WIDTH
    assert observe.status_cell({"status": "interrupted", "stop_reason": "Ctrl-C"}) == "interrupted (Ctrl-C)"
    flagged = {"status": "succeeded", "stop_reason": None, "flags": ["shared the CPU with local run dev/b (pid 7)"]}
    assert observe.status_cell(flagged) == "succeeded (shared the CPU with local run dev/b (pid 7))"


def test_status_of_a_language_model_shows_tokens_per_gpu_mfu_dollars_and_energy_per_billion_tokens(tmp_path, capsys):
    """A Llama 3 run's row: tokens/s per GPU in place of its samples/s (sequences), its MFU (a float8 run's against
    both peaks, labelled), dollars per billion tokens at the region's on-demand price, its last validation loss and
    kWh per billion tokens; a ResNet-50 beside it keeps its samples/s and a '-' in the language model's column."""
    import json

    from tests.bench.conftest import llama3_summary, summary

    for name, doc in (("llama8b-bf16", llama3_summary("llama8b-bf16", started_at="2026-01-01T00:00:00Z")),
                      ("llama8b-fp8", llama3_summary("llama8b-fp8", precision="fp8", tokens_per_gpu=8000.0,
                                                     started_at="2026-01-01T01:00:00Z")),
                      (EXPERIMENT, summary(EXPERIMENT, rate=100.8, started_at="2026-01-01T02:00:00Z"))):
        (tmp_path / "dev" / "r1" / name).mkdir(parents=True)
        (tmp_path / "dev" / "r1" / name / "summary.json").write_text(json.dumps(doc))
    code, out, err = status(capsys, tmp_path)
    assert code == 0 and not err
    head, _, *rows = out.split("\n\n", 1)[1].splitlines()
    assert "THROUGHPUT" in head and "LANGUAGE MODEL" in head and "ENERGY" in head
    rows = [" ".join(r.split()) for r in rows]
    assert ("6,000 tokens/s/GPU (48,000 in all) MFU 35.1%, $318.52/B tokens, val loss 2.71 "
            "30.1 kWh/B tokens, 1.01 kWh") in rows[0]
    assert ("8,000 tokens/s/GPU (64,000 in all) MFU 46.8% (bf16 peak), 23.4% (fp8 peak), $238.89/B tokens, "
            "val loss 2.71 22.6 kWh/B tokens") in rows[1]
    assert "100.8 samples/s - -" in rows[2]
    code, out, _ = status(capsys, tmp_path, "--json")
    bf16, fp8, resnet = json.loads(out)["runs"]
    assert (bf16["tokens_per_s_per_device"], bf16["mfu"], bf16["usd_per_billion_tokens"], bf16["final_val_loss"],
            bf16["model_size"]) == (6000.0, 0.351352, 318.5185, 2.71, "8b")
    assert bf16["kwh_per_billion_tokens"] == pytest.approx(30.092593) and fp8["mfu_fp8_peak"] == 0.234116
    assert resnet["tokens_per_s"] is None and resnet["usd_per_billion_tokens"] is None


def test_without_a_language_model_the_status_table_has_no_column_for_one(tmp_path, capsys):
    summaries(tmp_path)
    _, out, _ = status(capsys, tmp_path)
    assert "LANGUAGE MODEL" not in out and "tokens" not in out
