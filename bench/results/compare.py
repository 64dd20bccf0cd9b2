"""Is B faster than A, or is it noise? Runs matched by experiment, their samples (repeats, or batch means of
steady step times), the ratio with its interval, and what differs in what ran (``bench compare`` prints it,
``bench.commands.compare``; the report's "Change between runs" uses it too)."""

from __future__ import annotations

import json
import warnings
from typing import Any, Iterable, Mapping, Sequence

import bench.results.compare_stats as S
from bench.results.language_model import is_language_model
from bench.results.rank_lines import RankLines
from bench.results.timeline import parse_iso
from core.contract import summary_fields as F

MAX_BATCHES = 20
STEP_NOTE = ("indicative, not a verdict: from one run a side the interval holds the noise within a run, not "
             f"between runs (another node, the machine's load, clocks); only repeats measure that (repeats: "
             f"{S.VERDICT_RUNS} or more a side)")
FEW_RUNS_NOTE = (f"indicative, not a verdict: a verdict needs {S.VERDICT_RUNS} or more runs a side; with 2, a real "
                 "10% change is missed more often than found where runs vary by 2% or more")
UNDETERMINED = "undetermined"  # an interval the samples cannot bound (unbounded, or reaching 0: compare_stats)
SLOWER_EXIT = 1  # a verdict of "slower" (runs on both sides): for CI gates
ERROR_EXIT = 3  # compare itself failed: never read as "slower"
# Row fields compared besides what_ran (older summaries have no what_ran: their device record stands in).
ROW_FACTS = ("workload", "framework", "gpu", "instance_type", "nodes", "gpus_per_node", "world_size", "batch_size",
             "precision", "image", "git_commit",
             # a language model's shape (None on both sides for any other run: never a difference)
             "model_size", "seq_len", "tensor_parallel", "data_parallel", "sharding", "activation_checkpoint",
             "fp8_recipe")
DEVICE_FACTS = (F.TORCH, F.CUDA, F.CUDNN, F.NCCL, F.DRIVER)
# A language model's figures compared beside its throughput (the ratio of tokens/s is that of samples/s)
LM_FIGURES = ("tokens_per_s_per_device", "mfu", "mfu_fp8_peak", "usd_per_billion_tokens", "final_val_loss",
              "kwh_per_billion_tokens")

Run = tuple[Mapping[str, Any], Mapping[int, list[Mapping[str, Any]]]]  # (row, rank lines), bench.results.frames.runs


# ---- pure: lines -> samples ------------------------------------------------------------------

def step_samples(by_rank: Mapping[int, list[Mapping[str, Any]]]) -> tuple[list[float], float | None]:
    """(each steady step's time, the slowest rank's, in order; global samples per step), from the lines of one
    experiment run (a ``RankLines``, or dicts as the readers give them).

    A line without ``step_times_s`` gives one value, its interval's time over its steps.
    """
    return RankLines.of(by_rank).step_samples()


# ---- pure: runs -> comparison ----------------------------------------------------------------

def by_experiment(runs: Iterable[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for row, lines in runs:
        out.setdefault(str(row.get("experiment")), []).append((row, lines))
    return out


def started_at(runs: Sequence[Run]) -> float | None:
    """When a run began, in epoch seconds: the earliest ``started_at`` of its rows (their summaries, read by
    the timeline's ``parse_iso``: naive times are UTC); None where no row says (a run killed before its
    summary) or what it says is no timestamp."""
    times = [t for t in (parse_iso(row.get("started_at")) for row, _ in runs) if t is not None]
    return min(times) if times else None


def in_start_order(by_run: Mapping[str, Sequence[Run]]) -> list[str]:
    """Run ids by when each run started (``started_at``), runs that do not say last, by id among equals:
    a run's name says nothing of its age (a notebook's ``nb-...`` sorts after ``run-...``)."""
    def key(run_id: str):
        t = started_at(by_run[run_id])
        return (t is None, t or 0.0, run_id)
    return sorted(by_run, key=key)


def usable(runs: Sequence[Run]) -> list[Run]:
    return [(r, ln) for r, ln in runs if r.get("status") == F.SUCCEEDED and r.get("samples_per_s")]


def facts(row: Mapping[str, Any]) -> dict[str, Any]:
    """What ran, flat: the summary's what_ran, else the row's shape and device record."""
    out = {k: row.get(k) for k in ROW_FACTS}
    device = row.get("device") or {}
    out.update({k: device.get(k) for k in DEVICE_FACTS})
    out.update({k: v for k, v in (row.get("what_ran") or {}).items() if v is not None or k not in out})
    return out


def differences(a_rows: Sequence[Mapping[str, Any]], b_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each fact whose values differ between the sides: ``{field, a: [values], b: [values]}`` (null: unknown)."""
    a_facts, b_facts = [facts(r) for r in a_rows], [facts(r) for r in b_rows]
    keys = list(dict.fromkeys(k for f in a_facts + b_facts for k in f))
    out = []
    for k in keys:
        a = sorted({json.dumps(f.get(k)) for f in a_facts})
        b = sorted({json.dumps(f.get(k)) for f in b_facts})
        if a != b:
            out.append({"field": k, "a": [json.loads(x) for x in a], "b": [json.loads(x) for x in b]})
    return out


def joules_per_sample(runs: Sequence[Run]) -> float | None:
    """The runs' mean energy per sample (``bench.results.hardware``), over those whose telemetry measured power."""
    values = [r["joules_per_sample"] for r, _ in runs if isinstance(r.get("joules_per_sample"), (int, float))
              and r["joules_per_sample"] == r["joules_per_sample"]]
    return sum(values) / len(values) if values else None


def mean_of(runs: Sequence[Run], key: str) -> float | None:
    """The runs' mean ``key`` over those that have one (a number, not NaN); None where none has."""
    values = [r[key] for r, _ in runs if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)
              and r[key] == r[key]]
    return sum(values) / len(values) if values else None


def language_model(a: Sequence[Run], b: Sequence[Run]) -> dict[str, Any] | None:
    """A language model's figures a side (``LM_FIGURES``, each the mean over the side's succeeded runs), for an
    experiment either side of which trained one (``bench.results.language_model``); None for any other."""
    if not any(is_language_model(r) for r, _ in [*a, *b]):
        return None
    return {side: {k: mean_of(runs, k) for k in LM_FIGURES} for side, runs in (("a", a), ("b", b))}


def compare_experiment(name: str, a_runs: Sequence[Run], b_runs: Sequence[Run],
                       confidence: float = S.CONFIDENCE) -> dict[str, Any]:
    a, b = usable(a_runs), usable(b_runs)
    rate = lambda rs: sum(r["samples_per_s"] for r, _ in rs) / len(rs) if rs else None  # noqa: E731
    doc: dict[str, Any] = {"experiment": name, "a_runs": len(a), "b_runs": len(b), "a_samples_per_s": rate(a),
                           "b_samples_per_s": rate(b), "a_joules_per_sample": joules_per_sample(a),
                           "b_joules_per_sample": joules_per_sample(b), "ratio": None, "low": None, "high": None,
                           "verdict": None,
                           "method": None, "n_a": None, "n_b": None, "p_value": None, "df": None, "note": None,
                           "indicative": None, "language_model": language_model(a, b),
                           "differences": differences([r for r, _ in a_runs], [r for r, _ in b_runs])}
    if not a or not b:
        side, runs = ("A", a_runs) if not a else ("B", b_runs)
        # why not: each run's status (diverged, interrupted, ...), so a run that went wrong is never just "missing"
        why = sorted({str(r.get("status")) if r.get("status") in F.STATUSES else "failed" for r, _ in runs}
                     - {F.SUCCEEDED})
        doc["note"] = (f"no succeeded run with a throughput in {side}"
                       + (f" ({side} {', '.join(why)})" if why else ""))
        return doc
    if len(a) >= 2 and len(b) >= 2:
        result = S.compare_throughputs([r["samples_per_s"] for r, _ in a], [r["samples_per_s"] for r, _ in b],
                                       confidence)
        doc["note"] = FEW_RUNS_NOTE if min(len(a), len(b)) < S.VERDICT_RUNS else None
    else:
        sides = []
        for runs in (a, b):  # one run a side, or one against several: the runs' steps pooled, in order
            got = [step_samples(lines) for _, lines in runs]
            per = [p for _, p in got if p]
            sides.append(([t for times, _ in got for t in times], sum(per) / len(per) if per else None))
        (ta, ka), (tb, kb) = sides
        if len(ta) < 2 or len(tb) < 2 or not ka or not kb:
            doc["note"] = "fewer than 2 steady steps with times (and samples) a side: no interval"
            return doc
        result = S.compare_step_times(ta, tb, samples_per_step_a=ka, samples_per_step_b=kb,
                                      max_batches=MAX_BATCHES, confidence=confidence)
        doc["note"] = STEP_NOTE
    doc.update({k: v for k, v in result.to_dict().items() if k != "confidence"})
    if doc["note"] is not None:
        # Within-run noise only, or too few runs: what it suggests is shown, never given as a verdict (nor failing
        # a CI gate).
        doc["indicative"], doc["verdict"] = doc["verdict"], None
    return doc


def comparison(a_runs: Sequence[Run], b_runs: Sequence[Run], *, a: str, b: str) -> dict[str, Any]:
    """The whole comparison as one document (what ``--json`` prints)."""
    ga, gb = by_experiment(a_runs), by_experiment(b_runs)
    if len(ga) == len(gb) == 1 and set(ga) != set(gb):  # one experiment a side: compare them whatever their names
        (na, ra), (nb, rb) = next(iter(ga.items())), next(iter(gb.items()))
        ga, gb = {f"{na} vs {nb}": ra}, {f"{na} vs {nb}": rb}
    common = [n for n in ga if n in gb]
    experiments = [compare_experiment(n, ga[n], gb[n]) for n in sorted(common)]
    return {"a": a, "b": b, "confidence": S.CONFIDENCE, "experiments": experiments,
            "only_in_a": sorted(set(ga) - set(gb)), "only_in_b": sorted(set(gb) - set(ga)),
            "slower": [e["experiment"] for e in experiments if e["verdict"] == S.SLOWER]}


# ---- text ------------------------------------------------------------------------------------

def interval_text(low: float | None, high: float | None) -> str:
    """The interval as both ``compare`` and the report print it: ``[0.912, 1.034]``, or "undetermined" where the
    samples cannot bound the ratio (``compare_stats.rate_ratio_interval``), never a negative bound."""
    if low is None or high is None or low <= 0:
        return UNDETERMINED
    return f"[{low:.3f}, {high:.3f}]"


def legend(doc: Mapping[str, Any]) -> list[str]:
    """The sentences under ``compare``'s table: what its numbers are, when it gives a verdict, and each note of an
    indicative row."""
    lines = [f"The figure in brackets after a throughput is that side's number of runs, and n the number of samples "
             f"a side behind the interval (runs, or batch means of one run's steady step times). A verdict needs "
             f"{S.VERDICT_RUNS} or more runs a side and an interval that excludes 1; an interval is {UNDETERMINED} "
             f"where the samples cannot bound the ratio."]
    notes = dict.fromkeys(e["note"] for e in doc["experiments"] if e.get("indicative"))
    return lines + [f"{note[0].upper()}{note[1:]}." for note in notes]


# ---- I/O edges -------------------------------------------------------------------------------


def load_side(source: str) -> tuple[list[Run], list[str]]:
    import bench.results.frames as results

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = results.runs(source)
    return runs, list(dict.fromkeys(str(w.message) for w in caught))
