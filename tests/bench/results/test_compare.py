"""bench compare: repeats of one run are "no change", 20% shorter step times are "faster", what differs is listed."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.results import compare
from bench.results import compare_stats as S
from bench.results import frames as results
from tests.bench.conftest import ROOT, summary
from workloads.train.harness.summary import throughput


def noisy_lines(rank: int, seed: int, *, step_time: float = 0.1, steps: int = 200, log_every: int = 10,
                warmup: int = 10, batch: int = 32, world: int = 2) -> list[dict]:
    """Metrics lines as the trainer writes them: one per ``log_every`` steps with each step's time."""
    rng = random.Random(seed * 100 + rank)
    out = []
    for end in range(log_every, steps + 1, log_every):
        times = [round(step_time * (1 + 0.05 * rng.gauss(0, 1)), 6) for _ in range(log_every)]
        out.append({"step": end, "epoch": 0, "loss": 1.0, "steps": log_every, "samples": batch * log_every,
                    "step_time_s": round(sum(times), 6), "samples_per_s": batch * log_every / sum(times),
                    "step_times_s": times, "wall_time": 1_700_000_000 + end, "world_size": world, "rank": rank,
                    "restart": 0, "warmup": end <= warmup})
    return out


def write_run(root: Path, rel: str, seed: int, *, step_time: float = 0.1, **facts) -> Path:
    d = root / rel
    (d / "metrics").mkdir(parents=True)
    by_rank = {r: noisy_lines(r, seed, step_time=step_time) for r in range(2)}
    for r, lines in by_rank.items():
        (d / "metrics" / f"rank-{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    tp = throughput(by_rank)  # the launcher's own figure from these lines
    doc = summary(rel.rsplit("/", 1)[-1], nodes=1, gpus=2, rate=tp["samples_per_s_total"],
                  what_ran={"torch": "2.14.1", "driver": "580.1", "zone": None, **facts})
    doc["throughput"] = tp
    (d / "summary.json").write_text(json.dumps(doc))
    return d


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "compare", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """results/gpu/: r1 and r2 are repeats of one run (other noise), r3 has step times 20% shorter and a
    newer driver; rep-a and rep-b hold three repeats each (rep-b's 20% shorter)."""
    root = tmp_path_factory.mktemp("cmp") / "results" / "gpu"
    write_run(root, "r1/resnet50", seed=1)
    write_run(root, "r2/resnet50", seed=2)
    write_run(root, "r3/resnet50", seed=3, step_time=0.08, driver="590.2")
    for i in range(3):
        write_run(root, f"rep-a/resnet50-{i}", seed=10 + i)
        write_run(root, f"rep-b/resnet50-{i}", seed=20 + i, step_time=0.08)
    return root


def test_step_samples_are_each_steps_slowest_rank_and_the_global_batch(tree):
    (_, by_rank), = results.runs(str(tree / "r1" / "resnet50"))
    times, per_step = compare.step_samples(by_rank)
    assert len(times) == 190 and per_step == 64  # 200 steps less 10 warm-up; 2 ranks x 32
    assert times[0] == max(by_rank[0][1]["step_times_s"][0], by_rank[1][1]["step_times_s"][0])
    assert len(S.batch_means(times, 20)) == 20 and S.batch_means([1.0, 2.0], 20) == [1.0, 2.0]
    # 45 values in 20 batches: five of 3 values, then fifteen of 2; every value in one batch.
    means = S.batch_means(list(range(45)), 20)
    assert means[:2] == [1.0, 4.0] and means[5] == 15.5 and means[-1] == 43.5
    # A run that slows down at its end: the mean is of every step (its throughput), the batches give the spread.
    mean, var_of_mean, n = S.batched([1.0] * 20 + [2.0] * 5, 20)
    assert mean == 30 / 25 and n == 20 and var_of_mean > 0


def one_rank_run(times: list[float], warmup: int = 5) -> dict[int, list[dict]]:
    return {0: [{"step": i + 1, "steps": 1, "samples": 8, "step_time_s": t, "step_times_s": [t], "restart": 0,
                 "warmup": i < warmup} for i, t in enumerate(times)]}


def test_a_run_that_slows_at_its_end_is_compared_by_all_its_steps():
    """25 steady steps, the last 5 three times as long: throughput 8 / 0.14 against 8 / 0.1, a ratio of 0.714.
    (Batch means that left the last 25 mod 20 steps out gave about 1.0, "no change".)"""
    a = [0.1 + 0.001 * (-1) ** i for i in range(30)]
    b = a[:25] + [0.3] * 5
    rows = [{"experiment": "x", "status": "succeeded", "samples_per_s": 8 / (sum(t[5:]) / 25)} for t in (a, b)]
    e = compare.compare_experiment("x", [(rows[0], one_rank_run(a))], [(rows[1], one_rank_run(b))])
    assert e["ratio"] == pytest.approx(0.1 / 0.14, rel=0.01)
    assert e["ratio"] == pytest.approx(e["b_samples_per_s"] / e["a_samples_per_s"], rel=1e-9)
    assert e["low"] < e["ratio"] < e["high"]  # 5 slow steps of 25: too few to call it slower at 95% (p = 0.058)


def test_repeats_of_one_run_are_no_change(tree):
    doc = compare.comparison(results.runs(str(tree / "r1")), results.runs(str(tree / "r2")), a="r1", b="r2")
    (e,) = doc["experiments"]
    assert e["verdict"] is None and e["indicative"] == S.NO_CHANGE and e["method"].startswith("steady step times")
    assert e["low"] < 1 < e["high"] and abs(e["ratio"] - 1) < 0.02 and (e["n_a"], e["n_b"]) == (20, 20)
    assert e["differences"] == [] and doc["slower"] == []


def test_twenty_percent_shorter_step_times_are_faster_by_a_quarter(tree):
    doc = compare.comparison(results.runs(str(tree / "r1")), results.runs(str(tree / "r3")), a="r1", b="r3")
    (e,) = doc["experiments"]
    # One run a side: the interval holds only the noise within a run, so it is indicative, never a verdict.
    assert e["verdict"] is None and e["indicative"] == S.FASTER and 1.2 < e["low"] < e["ratio"] < e["high"] < 1.3
    assert e["ratio"] == pytest.approx(e["b_samples_per_s"] / e["a_samples_per_s"], rel=0.01)
    assert {"field": "driver", "a": ["580.1"], "b": ["590.2"]} in e["differences"]
    back = compare.comparison(results.runs(str(tree / "r3")), results.runs(str(tree / "r1")), a="r3", b="r1")
    assert back["experiments"][0]["indicative"] == S.SLOWER and back["slower"] == []


def test_repeats_use_the_runs_throughputs(tree):
    # rep-a's and rep-b's folders are named resnet50-0..2: named as one experiment, they are its repeats.
    strip = lambda runs: [(dict(r, experiment="resnet50"), ln) for r, ln in runs]  # noqa: E731
    a, b = strip(results.runs(str(tree / "rep-a"))), strip(results.runs(str(tree / "rep-b")))
    (faster,) = compare.comparison(a, b, a="A", b="B")["experiments"]
    assert faster["method"].startswith("repeats") and (faster["n_a"], faster["n_b"]) == (3, 3)
    assert faster["verdict"] == S.FASTER and faster["ratio"] == pytest.approx(1.25, abs=0.02)
    (same,) = compare.comparison(a, a[::-1], a="A", b="A")["experiments"]
    assert same["verdict"] == S.NO_CHANGE and same["ratio"] == pytest.approx(1.0)


def test_cli_table_json_and_exit_codes(tree, tmp_path):
    done = run_cli(str(tree / "r1"), str(tree / "r3"))
    assert done.returncode == 0, done.stderr
    assert "indicative: faster" in done.stdout and "driver 580.1 -> 590.2" in done.stdout
    assert "step times, n=20+20" in done.stdout and "not between runs" in done.stdout
    # One run a side, 20% slower: indicative only, so a CI gate does not fail on within-run noise.
    slower = run_cli(str(tree / "r3"), str(tree / "r1"), "--json")
    assert slower.returncode == 0, slower.stderr
    doc = json.loads(slower.stdout)
    assert doc["slower"] == [] and doc["experiments"][0]["verdict"] is None
    assert doc["experiments"][0]["indicative"] == "slower"
    by_name = run_cli("gpu/r1", "gpu/r2", "--results-root", str(tree.parent))
    assert by_name.returncode == 0 and "indicative: no change at this noise" in by_name.stdout
    missing = run_cli(str(tmp_path / "nope"), str(tree / "r1"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no results at" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli(str(tmp_path / "empty"), str(tree / "r1"))
    assert empty.returncode == 2 and "nothing loadable" in empty.stderr and "Traceback" not in empty.stderr


def test_run_text_cannot_drive_the_terminal(tree, tmp_path):
    root = tmp_path / "hostile"
    write_run(root, "a/x", seed=1)
    write_run(root, "b/x", seed=2, driver="\x1b]0;pwned\x07\x1b[31m590")
    done = run_cli(str(root / "a"), str(root / "b"))
    assert done.returncode == 0 and "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "driver 580.1 -> \\x1b]0;pwned\\x07\\x1b[31m590" in done.stdout  # shown as the rest of the CLI shows it


def test_hostile_step_times_are_dropped_with_a_warning(tree, tmp_path):
    d = shutil.copytree(tree / "r1", tmp_path / "bad" / "r1")
    rank = d / "resnet50" / "metrics" / "rank-0.jsonl"
    lines = [json.loads(x) for x in rank.read_text().splitlines()]
    lines[5]["step_times_s"] = ["0.1", None]
    rank.write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = run_cli(str(d), str(tree / "r2"))
    assert done.returncode == 0 and "step_times_s" in done.stderr and "Traceback" not in done.stderr


def test_a_real_run_against_itself_is_no_change_and_a_faster_copy_is_faster(real_run, tmp_path):
    """The real local run's lines (dev's cifar10-elastic): itself is no change; its step times x 0.8 are faster."""
    src = next(p.parent for p in real_run.rglob("summary.json"))
    fast = shutil.copytree(src, tmp_path / "fast" / src.name)
    for rank in (fast / "metrics").glob("rank-*.jsonl"):
        lines = [json.loads(x) for x in rank.read_text().splitlines()]
        for x in lines:
            x["step_time_s"] = x["step_time_s"] * 0.8
            x["step_times_s"] = [t * 0.8 for t in x.get("step_times_s") or []]
        rank.write_text("".join(json.dumps(x) + "\n" for x in lines))
    same = compare.comparison(results.runs(str(src)), results.runs(str(src)), a="A", b="A")["experiments"][0]
    assert same["indicative"] == S.NO_CHANGE and same["ratio"] == pytest.approx(1.0)
    faster = compare.comparison(results.runs(str(src)), results.runs(str(fast)), a="A", b="B")["experiments"][0]
    assert faster["indicative"] == S.FASTER and faster["ratio"] == pytest.approx(1.25, rel=1e-3)
    assert same["verdict"] is faster["verdict"] is None


def test_a_side_without_a_succeeded_run_says_how_its_runs_ended():
    from bench.results.compare import compare_experiment

    a = [({"status": "diverged", "samples_per_s": None}, "r1"), ({"status": "\x1b[2J", "samples_per_s": 9.0}, "r2")]
    b = [({"status": "succeeded", "samples_per_s": 5.0}, "r3")]
    doc = compare_experiment("x", a, b)
    assert doc["verdict"] is None and doc["note"] == "no succeeded run with a throughput in A (A diverged, failed)"


def test_with_runs_on_both_sides_slower_is_a_verdict_and_exit_1_and_a_crash_is_exit_3(tmp_path, monkeypatch):
    """Several runs of a stack a side: the between-run interval, a verdict, and exit 1 when slower (CI gates).
    A failure of compare itself has its own exit code, so a gate never reads "broken" as "slower"."""
    import argparse

    from bench.commands import compare as command

    for run, seed, step in (("r1", 1, 0.1), ("r2", 2, 0.1), ("r3", 3, 0.1), ("r4", 4, 0.125), ("r5", 5, 0.125),
                            ("r6", 6, 0.125)):
        write_run(tmp_path / ("a" if run in ("r1", "r2", "r3") else "b"), f"{run}/resnet50", seed=seed, step_time=step)
    slower = run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert slower.returncode == compare.SLOWER_EXIT, slower.stderr
    (e,) = json.loads(slower.stdout)["experiments"]
    assert e["verdict"] == S.SLOWER and e["method"].startswith("repeats") and (e["n_a"], e["n_b"]) == (3, 3)

    def broken(*_a, **_k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(command, "comparison", broken)
    args = argparse.Namespace(a=str(tmp_path / "a"), b=str(tmp_path / "b"), json=False, results_root="results")
    assert command.main(args) == compare.ERROR_EXIT == 3


def rated_runs(root: Path, side: str, rates: list[float]) -> Path:
    """``root/side/``: one run of ``x`` per rate, each a summary with that throughput and no metrics lines."""
    for i, rate in enumerate(rates):
        d = root / side / f"r{i}" / "x"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(summary("x", nodes=1, gpus=1, rate=rate)))
    return root / side


def test_two_runs_a_side_are_indicative_and_an_interval_reaching_zero_is_undetermined(tmp_path):
    """Two runs a side of identical code on a loaded machine (samples/s 100 and 102 against 60 and 100): Fieller's
    set is [-1.70, 3.31], a negative bound a ratio of rates never has. It prints as undetermined, and two runs a
    side are indicative (a verdict needs VERDICT_RUNS), so a CI gate does not fail on them."""
    a, b = rated_runs(tmp_path, "a", [100.0, 102.0]), rated_runs(tmp_path, "b", [60.0, 100.0])
    done = run_cli(str(a), str(b))
    assert done.returncode == 0, done.stderr
    assert "undetermined" in done.stdout and "[-" not in done.stdout and "[—" not in done.stdout
    doc = json.loads(run_cli(str(a), str(b), "--json").stdout)
    (e,) = doc["experiments"]
    assert e["verdict"] is None and e["indicative"] == S.NO_CHANGE and e["note"] == compare.FEW_RUNS_NOTE
    assert (e["low"], e["high"]) == (None, None) and e["ratio"] == pytest.approx(80 / 101)
    # Two a side whose interval is bounded: still indicative, never a verdict nor exit 1.
    slow = run_cli(str(rated_runs(tmp_path, "c", [100.0, 101.0])), str(rated_runs(tmp_path, "d", [80.0, 81.0])))
    assert slow.returncode == 0 and "indicative: slower" in slow.stdout and "[0.7" in slow.stdout


def test_the_legend_is_sentences_that_state_the_verdict_rule(tree):
    from bench.commands.compare import render

    doc = compare.comparison(results.runs(str(tree / "r1")), results.runs(str(tree / "r3")), a="r1", b="r3")
    legend = compare.legend(doc)
    assert len(legend) == 2 and all(p[0].isupper() and p.endswith(".") for p in legend), legend
    assert f"A verdict needs {S.VERDICT_RUNS} or more runs a side" in legend[0] and "not between runs" in legend[1]
    printed = " ".join(render(doc).split())
    assert all(" ".join(p.split()) in printed for p in legend)
    assert "(runs) per side" not in printed and "indicative: indicative" not in printed


def test_readme_results_page_and_code_state_one_verdict_rule():
    readme, results_page = (ROOT / "README.md").read_text(), (ROOT / "docs" / "RESULTS.md").read_text()
    words = {2: "two", 3: "three", 5: "five"}
    assert f"only where repeats support it ({S.VERDICT_RUNS} or more runs on both sides" in readme
    assert f"with {words[S.VERDICT_RUNS]} or more a side it gives a verdict" in " ".join(results_page.split())
    assert f"So a verdict needs {S.VERDICT_RUNS} runs a side" in " ".join(results_page.split())


def test_a_language_models_tokens_per_gpu_mfu_dollars_and_val_loss_are_compared_beside_its_throughput(tmp_path):
    """``compare`` of two Llama 3 runs: the throughput table as for any run (the ratio of tokens/s is that of
    samples/s), then each side's tokens/s per GPU, MFU, dollars and energy per billion tokens and last validation
    loss with B/A; what differs lists the model's shape."""
    from tests.bench.conftest import llama3_summary, write_experiment

    write_experiment(tmp_path, "llm/a/llama8b", llama3_summary("llama8b"))
    faster = llama3_summary("llama8b", tokens_per_gpu=6600.0, val_losses=((100, 2.9), (200, 2.6)))
    faster["language_model"]["activation_checkpoint"] = "full"
    write_experiment(tmp_path, "llm/b/llama8b", faster)
    done = run_cli("llm/a", "llm/b", "--results-root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert ("Language model (mean of each side's runs): llama8b: tokens/s/GPU A 6,000, B 6,600 (B/A 1.100); "
            "MFU A 35.1%, B 38.6% (B/A 1.100); $/B tokens A 318.52, B 289.56 (B/A 0.909); val loss A 2.71, "
            "B 2.6 (B/A 0.959); kWh/B tokens A 30.1, B 27.4 (B/A 0.909)") in out
    assert "activation_checkpoint selective -> full" in out
    doc = json.loads(run_cli("llm/a", "llm/b", "--results-root", str(tmp_path), "--json").stdout)
    lm = doc["experiments"][0]["language_model"]
    assert lm["a"]["mfu_fp8_peak"] is None and lm["b"]["tokens_per_s_per_device"] == 6600.0
