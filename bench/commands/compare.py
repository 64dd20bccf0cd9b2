"""``eksbench compare A B [--json]``: per experiment, is B faster than A, or is it noise?

A and B are results at any level (an experiment, a run, a whole stack's runs), run handles under
``--results-root`` (``dev/run-001``), local folders or ``s3://`` prefixes (``bench.results.sources``), read like
``bench report`` reads them (untrusted input, bounded, ``bench.results.frames``). Experiments are matched by name; only
succeeded runs with a throughput count.

For each experiment, the throughput ratio B / A with a 95% interval, and a verdict (faster,
slower, or no change at this noise) where the data can support one, ``bench.results.compare_stats``; an interval the
samples cannot bound (unbounded, or reaching 0, where a ratio of rates never goes) is "undetermined":

- **repeats** (two or more runs a side: ``repeats:``, or the runs of a stack): Welch's t and
  Fieller's interval on the runs' samples/s; a verdict with three or more a side (``VERDICT_RUNS``: with two, the
  calibration finds a real 10% change less than half the time), indicative with two;
- otherwise **steady step times** (each steady step's time, the slowest rank's, from the
  metrics lines' ``step_times_s``): the ratio of the mean step times, its variance from batch
  means, so that neighbouring steps, which are correlated (clocks, caches, data loader), do
  not pass for independent samples. At most 20 batches a side (Schmeiser, "Batch size effects
  in the analysis of simulation output", Operations Research 30(3), 1982: 10 to 30 batches);
  runs shorter than that use every step. Such an interval holds the noise within one run, not
  the noise between runs (another node, the machine's load): what it suggests is shown as
  "indicative", never as a verdict, and never fails the exit code. Only repeats measure that.

Then what differs between the two sides: image, commit, versions, instance, zone, shape
(``what_ran`` of the summaries, ``workloads.train.harness.what_ran``).

Exit codes: 0 compared and no verdict of slower; 1 at least one experiment slower by a verdict from
repeats (for CI gates); 2 refused (a source missing or empty, or no experiment in common); 3 compare
itself failed.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any, Mapping

from bench.errors import fail
from bench.results.compare import ERROR_EXIT, SLOWER_EXIT, comparison, interval_text, legend, load_side
from bench.results.compare_stats import VERDICT_RUNS
from bench.project import add_results_root_option
from bench.results.sources import no_source, resolve_source
from bench.terminal import safe, safe_line
from core.contract import strict_json
from core.contract.results_location import HANDLE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="is B faster than A? throughput ratio, 95%% interval, what changed",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="For each experiment both sides ran, the throughput ratio B / A with a 95% interval, and a\n"
                    f"verdict (faster, slower, no change at this noise) where {VERDICT_RUNS} or more runs a side support one; with\n"
                    "fewer the ratio is only indicative. Then what differs: image, commit, versions, instance, shape.\n"
                    f"A and B are run handles ({HANDLE}, under --results-root), results folders or s3:// prefixes.\n\n"
                    "exit codes: 0 no verdict of slower; 1 slower by a verdict from repeats (a CI gate);\n"
                    "2 a source missing or empty, or nothing in common; 3 the comparison itself failed.",
        epilog="examples:\n  eksbench compare dev/20261126-101500 dev/20261127-091228\n"
               "  eksbench compare s3://my-results/dev/baseline results/dev/20261127-091228 --json")
    p.add_argument("a", metavar="A", help=f"baseline results: a run handle ({HANDLE}, under --results-root), a "
                                          "folder, or s3://")
    p.add_argument("b", metavar="B", help="the results to compare with A")
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    add_results_root_option(p)
    p.set_defaults(func=main)


SHOWN = 200  # characters of a name or value from a run shown in the table (run text, escaped: bench.terminal)


def _num(v: Any, spec: str = ".4g") -> str:
    return "—" if v is None else format(v, spec)


def _value(v: Any) -> str:
    return "unknown" if v is None else safe_line(v, SHOWN)


def render(doc: Mapping[str, Any]) -> str:
    head = ("experiment", "A samples/s", "B samples/s", "B/A", f"{doc['confidence']:.0%} interval", "verdict", "from")
    rows = [head]
    for e in doc["experiments"]:
        method = "repeats" if (e["method"] or "").startswith("repeats") else "step times" if e["method"] else "—"
        rows.append((safe_line(e["experiment"], SHOWN), f"{_num(e['a_samples_per_s'])} ({e['a_runs']})",
                     f"{_num(e['b_samples_per_s'])} ({e['b_runs']})", _num(e["ratio"], ".3f"),
                     interval_text(e["low"], e["high"]) if e["ratio"] is not None else "—",
                     e["verdict"] or (f"indicative: {e['indicative']}" if e.get("indicative") else None)
                     or e["note"] or "—",  # ours: never run text
                     f"{method}, n={e['n_a']}+{e['n_b']}" if e["n_a"] else method))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = [f"A: {safe_line(doc['a'], 1000)}", f"B: {safe_line(doc['b'], 1000)}", ""]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += [textwrap.fill(paragraph, 110) for paragraph in legend(doc)]
    lines += energy_lines(doc)
    lines += language_model_lines(doc)
    changed = [e for e in doc["experiments"] if e["differences"]]
    if changed:
        lines += ["", "What differs (A -> B):"]
        for e in changed:
            parts = [f"{safe_line(d['field'], 60)} {', '.join(map(_value, d['a']))} -> "
                     f"{', '.join(map(_value, d['b']))}" for d in e["differences"]]
            lines.append(f"  {safe_line(e['experiment'], SHOWN)}: " + "; ".join(parts))
    else:
        lines += ["", "What ran is the same on both sides (as far as the summaries know)."]
    for side in ("a", "b"):
        if doc[f"only_in_{side}"]:
            lines.append(f"only in {side.upper()}: {safe_line(', '.join(doc[f'only_in_{side}']), 2000)}")
    return "\n".join(lines)


def energy_lines(doc: Mapping[str, Any]) -> list[str]:
    """Energy per sample a side (the runs' GPU or CPU power over their throughput), where either side measured it."""
    out = []
    for e in doc["experiments"]:
        a, b = e.get("a_joules_per_sample"), e.get("b_joules_per_sample")
        if a is None and b is None:
            continue
        ratio = f" (B/A {b / a:.3f})" if a and b is not None else ""
        out.append(f"  {safe_line(e['experiment'], SHOWN)}: A {_num(a, '.3g')} J/sample, B {_num(b, '.3g')} "
                   f"J/sample{ratio}")
    return ["", "Energy per sample:", *out] if out else []


LM_SHOWN = (("tokens_per_s_per_device", "tokens/s/GPU", ",.0f"), ("mfu", "MFU", ".1%"),
            ("mfu_fp8_peak", "MFU (fp8 peak)", ".1%"), ("usd_per_billion_tokens", "$/B tokens", ",.2f"),
            ("final_val_loss", "val loss", ".4g"), ("kwh_per_billion_tokens", "kWh/B tokens", ".3g"))


def language_model_lines(doc: Mapping[str, Any]) -> list[str]:
    """A language model's figures a side (the mean of its succeeded runs), with B/A where both have one: tokens/s per
    GPU, MFU (for float8 against the bf16 peak and against the fp8 peak), dollars and energy per billion tokens, the
    last validation loss."""
    out = []
    for e in doc["experiments"]:
        lm = e.get("language_model")
        if not lm:
            continue
        parts = []
        for key, name, spec in LM_SHOWN:
            a, b = lm["a"].get(key), lm["b"].get(key)
            if a is None and b is None:
                continue
            ratio = f" (B/A {b / a:.3f})" if a and b is not None else ""
            parts.append(f"{name} A {_num(a, spec)}, B {_num(b, spec)}{ratio}")
        line = f"  {safe_line(e['experiment'], SHOWN)}:"
        for i, part in enumerate(parts):  # one figure is never split: past 110 characters the next starts a line
            if i and len(line) + len(part) + 2 > 110:
                out.append(line + ";")
                line = "   "
            line += (" " if i == 0 or line == "   " else "; ") + part
        out.append(line)
    return ["", "Language model (mean of each side's runs):", *out] if out else []


def main(args) -> int:
    try:
        return _main(args)
    except BrokenPipeError:  # the reader went away (`compare ... | head`): not a failure, ended at the top quietly
        raise
    except Exception as e:  # noqa: BLE001 - compare itself broke: its own exit code, never 1 (slower)
        print(safe(f"error: compare failed: {type(e).__name__}: {e}"), file=sys.stderr)
        return ERROR_EXIT


def _main(args) -> int:
    sources = []
    for given in (args.a, args.b):
        found = resolve_source(given, results_root=args.results_root)
        if found is None:
            return fail(no_source(given, results_root=args.results_root))
        sources.append(found)
    loaded = []
    for source in sources:
        runs, notes = load_side(source)
        if not runs:  # as report says it: why, in one line (no credentials, no bucket), else what was looked for
            return fail(f"nothing loadable under {source} ({notes[0] if notes else 'no summary.json, metrics/ or logs/'})")
        for n in notes:
            print(safe(f"warning: {n}"), file=sys.stderr)
        loaded.append(runs)
    doc = comparison(loaded[0], loaded[1], a=sources[0], b=sources[1])
    if not doc["experiments"]:
        return fail(f"no experiment in both: A has {', '.join(doc['only_in_a'])}; B has {', '.join(doc['only_in_b'])}")
    print(strict_json.dumps(doc, indent=1) if args.json else safe(render(doc)))
    return SLOWER_EXIT if doc["slower"] else 0
