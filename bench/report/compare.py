"""The report's "Change between runs" section: ``bench compare`` of each experiment's first and last run.

Where the sources hold an experiment in two or more runs (run ids) of one stack, its first run
(A) is compared with its last (B), first and last by when they started (``started_at``): throughput ratio with a 95% interval, the verdict, and what
differs between what ran. Several rows of one experiment in one run are its repeats. Rows and
words only; ``bench.report.page`` draws the table.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from bench.results import compare
from bench.results.compare_stats import CONFIDENCE, VERDICT_RUNS


def run_pairs(runs: Sequence[compare.Run]) -> list[tuple[str, str, str, list, list]]:
    """(experiment label, A run id, B run id, A's runs, B's runs) for each experiment seen in 2+ runs."""
    groups: dict[tuple, dict[str, list]] = {}
    for row, lines in runs:
        key = (row.get("stack"), row.get("experiment"))
        groups.setdefault(key, {}).setdefault(str(row.get("run_id")), []).append((row, lines))
    out = []
    for (stack, experiment), by_run in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(by_run) >= 2:
            order = compare.in_start_order(by_run)
            first, last = order[0], order[-1]
            label = f"{experiment} (stack {stack})" if stack else str(experiment)
            out.append((label, first, last, by_run[first], by_run[last]))
    return out


def change_rows(runs: Sequence[compare.Run]) -> list[dict[str, Any]]:
    rows = []
    for label, a_id, b_id, a, b in run_pairs(runs):
        e = compare.compare_experiment(label, a, b)
        interval = compare.interval_text(e["low"], e["high"]) if e["ratio"] is not None else None
        rows.append({"experiment": label, "a": f"{a_id} ({e['a_runs']})", "b": f"{b_id} ({e['b_runs']})",
                     "a_rate": e["a_samples_per_s"], "b_rate": e["b_samples_per_s"],
                     "ratio": round(e["ratio"], 4) if e["ratio"] is not None else None, "interval": interval,
                     "verdict": e["verdict"] or (f"indicative: {e['indicative']}" if e.get("indicative") else e["note"]),
                     "from": None if not e["method"] else "repeats" if e["method"].startswith("repeats")
                     else f"step times (n={e['n_a']}+{e['n_b']})",
                     "differs": differences_text(e["differences"])})
    return rows


def differences_text(diffs: Sequence[Mapping[str, Any]]) -> str | None:
    val = lambda vs: ", ".join("unknown" if v is None else str(v) for v in vs)  # noqa: E731
    return "; ".join(f"{d['field']}: {val(d['a'])} → {val(d['b'])}" for d in diffs) or None


COLUMNS = [("experiment", "experiment"), ("a", "A: first run (rows)"), ("b", "B: last run (rows)"),
           ("a_rate", "A samples/s"), ("b_rate", "B samples/s"), ("ratio", "B / A"),
           ("interval", f"{CONFIDENCE:.0%} interval"), ("verdict", "verdict"), ("from", "from"),
           ("differs", "what differs (A → B)")]
INTRO = ("Throughput of the last run over the first, with a "
         f"{CONFIDENCE:.0%} interval (Fieller's, with Welch's degrees of freedom) from the repeats when each "
         "side has two or more, else from batch means of the steady step times; the verdict says faster or "
         f"slower only when the interval excludes 1 and comes from {VERDICT_RUNS} or more repeats a side (with 2, "
         "a real 10% change is missed more often than found). An interval from one run a side holds "
         "the noise within that run only, not between runs (another node, the machine's load), so what it "
         "suggests is marked indicative, not a verdict: repeats measure that. An interval the samples cannot "
         "bound (unbounded, or reaching 0, where a ratio of rates never goes) is undetermined. What "
         "differs lists what ran (image, versions, driver, instance, zone, shape) where the two sides "
         "disagree. eksbench compare A B prints the same for any two results, with --json.")
NOTHING = ("Each experiment ran once here, so there is nothing to compare: give the report two runs of a stack "
           "(or its whole folder), or use eksbench compare A B.")
