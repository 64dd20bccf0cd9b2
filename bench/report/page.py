"""The report page: one self-contained HTML file from results (``bench report``, ``bench.commands.report``).

Its sections are built here and in the modules beside it; the figures come from the ``*_plot(s)`` modules
(``bench.report.figures`` holds what they share)."""

from __future__ import annotations

import base64
import hashlib
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from bench.errors import NotWritten
from bench.report.accuracy import accuracy_section
from bench.report.blocks import EmptySection, attr, empty_section, esc, figure
from bench.report.fabric import fabric_section
from bench.report.hardware import hardware_section
from bench.report.language_model import language_model_section
from bench.report.scaling import repeats_section, scaling_section
from bench.results.run_row import INPUT_BOUND_SHARE, input_bound
from bench.results.overview import run_figures
from bench.terminal import safe
from workloads.train.common.files import atomic_write

SUMMARY = (("experiment", "experiment"), ("workload", "workload"), ("framework", "framework"), ("status", "status"),
           ("gpu", "GPU"),
           ("instance_type", "instance"), ("shape", "nodes × per node"), ("batch_size", "batch"),
           ("precision", "precision"),
           ("samples_per_s", "samples/s"), ("samples_per_s_per_gpu", "samples/s per GPU"),
           ("busbw_peak_gbps", "peak busbw GB/s"),
           ("step_time_p50_s", "step p50 s"), ("step_time_p95_s", "step p95 s"), ("mfu", "MFU"),
           ("data_wait", "waiting for data"),
           ("wall_s", "wall s"), ("accuracy", "accuracy"), ("restarts", "restarts"), ("flags", "flags"),
           ("error", "error"))
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:20px 28px;background:#fff;min-height:100vh}
h1{font-size:24px;margin:4px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta,.note,.empty{color:#666}.estimate{color:#8a5a00;font-weight:600}.flag{color:#b3261e}
table{border-collapse:collapse;margin:8px 0;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 5px;text-align:left;vertical-align:top}
th{background:#f0f3f7;font-weight:600}td.error{max-width:320px;word-break:break-word}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#fdecea}td.status-succeeded{color:#1b7a2e}td.status-failed{color:#b3261e;font-weight:600}
.scroll{overflow-x:auto}img.plot{max-width:100%;display:block;margin:8px 0}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap}
"""
# Lets a test (or a reader's devtools) see that every embedded figure decoded in the browser.
LOADED_SCRIPT = ("addEventListener('load',function(){var i=[].slice.call(document.images);"
                 "document.body.setAttribute('data-images-loaded',"
                 "i.filter(function(x){return x.complete&&x.naturalWidth>0}).length+'/'+i.length)});")


# ---- formatting ------------------------------------------------------------------------

def fmt(value: Any) -> str:
    """A cell's text: blanks for missing, 4 significant digits for floats."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def status_class(status: str) -> str:
    """The status cell's class: one of the two the style sheet knows, never text from the run."""
    return f"status-{status}" if status in ("succeeded", "failed") else "status-other"


def table(rows, columns: Iterable[tuple[str, str]]) -> str:
    """An HTML table of ``rows`` (dicts, or a DataFrame: missing cells blank) in ``columns`` (key, title)."""
    rows = records(rows) if hasattr(rows, "to_dict") else rows
    columns = list(columns)
    head = "".join(f"<th>{esc(title)}</th>" for _, title in columns)
    body = []
    for r in rows:
        status = str(r.get("status") or "")
        cells = []
        for key, _ in columns:
            v = r.get(key)
            cls = "num" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            cls += f" {status_class(status)}" if key == "status" else " error" if key == "error" else ""
            cells.append(f'<td class="{attr(cls.strip())}">{esc(fmt(v))}</td>')
        body.append(f'<tr class="{"failed" if status == "failed" else ""}">{"".join(cells)}</tr>')
    return f'<div class="scroll"><table><tr>{head}</tr>{"".join(body)}</table></div>'


def records(df) -> list[dict[str, Any]]:
    """DataFrame rows as dicts with None (not NaN or NaT) for missing cells, times as ISO 8601 text."""
    import pandas as pd

    def cell(v: Any) -> Any:
        if _missing(v) or v is pd.NaT:
            return None
        return v.isoformat().replace("+00:00", "Z") if isinstance(v, pd.Timestamp) else v

    return [{k: cell(v) for k, v in r.items()} for r in df.to_dict("records")]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


# ---- sections --------------------------------------------------------------------------

def with_baseline(df, baseline: str):
    """Adds ``vs_baseline``: samples/s over the latest succeeded run of ``baseline``. KeyError if none."""
    base = df[(df["experiment"] == baseline) & (df["status"] == "succeeded") & df["samples_per_s"].notna()]
    if base.empty:
        raise KeyError(baseline)
    ref = float(base.sort_values("run_id").iloc[-1]["samples_per_s"])
    return df.assign(vs_baseline=(df["samples_per_s"].astype(float) / ref).round(3))


def summary_section(df, baseline: str | None) -> str:
    from bench.report.figures import labels

    cols = list(SUMMARY)
    if baseline:
        cols.insert(cols.index(("step_time_p50_s", "step p50 s")), ("vs_baseline", f"× {baseline}"))
    # an all-reduce run trains nothing: its figure is the peak bus bandwidth, in a column shown when one ran
    rows = [dict(r, experiment=name, shape=_shape(r), busbw_peak_gbps=run_figures(r)["busbw_peak_gbps"],
                 data_wait=_data_wait(r.get("data_wait_share")))
            for r, name in zip(records(df), labels(df))]
    for key, title in (("flags", "flags"), ("error", "error"), ("busbw_peak_gbps", "peak busbw GB/s"),
                       ("data_wait", "waiting for data"), ("instance_type", "instance"), ("mfu", "MFU"),
                       ("accuracy", "accuracy")):
        if not any(r[key] for r in rows):  # shown when some run has one (a local CPU run has no instance, no MFU)
            cols.remove((key, title))
    failed = sum(r["status"] != "succeeded" for r in rows)
    bound = [r["experiment"] for r in rows if input_bound(r.get("data_wait_share"))]
    note = f"{len(rows)} experiment run(s), {failed} not succeeded." + (
        f" Input-bound ({len(bound)}: {', '.join(bound)}): their steady steps waited for data "
        f"{INPUT_BOUND_SHARE:.0%} of the time or more, so their samples/s measure the input path, not the model."
        if bound else "") + (
        f" The × column is throughput relative to the latest succeeded run of {baseline}." if baseline else "")
    return f"<h2>Summary</h2><p>{esc(note)}</p>{table(rows, cols)}"


def _data_wait(share: Any) -> str | None:
    """The share of steady time spent waiting for data, as the summary shows it: "43% (input-bound)"."""
    if not isinstance(share, float):
        return None
    return f"{share:.0%}" + (" (input-bound)" if input_bound(share) else "")


def _shape(r: dict[str, Any]) -> str | None:
    if r["nodes"] is None:
        return None
    ws = f" (world {int(r['world_size'])})" if r["world_size"] and r["gpus_per_node"] and \
        r["world_size"] != r["nodes"] * r["gpus_per_node"] else ""
    return f"{int(r['nodes'])} × {fmt(r['gpus_per_node'])}{ws}"


def throughput_section(df) -> str:
    from bench.report.bar_plots import throughput_figure
    from bench.report.figures import per_gpu_word

    word = "process (CPU run: one process stands in for a GPU)" if per_gpu_word(df) == "process" else "GPU"
    return ("<h2>Throughput</h2>"
            f"<p>Steady-state samples/s (warm-up steps excluded), in total and per {esc(word)}.</p>"
            + figure(throughput_figure(df), "throughput per experiment", "No run reported a throughput."))


def steps_section(steps, df) -> str:
    from bench.report import step_plots

    parts = ["<h2>Loss curves</h2>",
             figure(step_plots.loss_figure(steps, df), "loss curves", "No metrics lines with a loss were found."),
             ("<h2>Step time distribution</h2><p>Time per step: each logged interval's time over its steps, as the "
              "summary's step percentiles count it. Left: steady intervals per rank (box: quartiles, whiskers 1.5 "
              "IQR, circles: outliers). Right: every logged interval in order; shaded ones are warm-up, dashed red "
              "lines are elastic restarts.</p>"),
             figure(step_plots.step_time_figure(steps, df), "step time per rank", "No step times were found.")]
    slow = step_plots.stragglers(steps)
    if slow:
        parts.append("<p><b>Stragglers</b> (median step time over "
                     f"{step_plots.STRAGGLER:g}× the experiment's typical rank):</p>")
        parts.append(table(slow, [(k, k) for k in ("run_id", "experiment", "rank", "median_step_s", "ratio")]))
    else:
        parts.append('<p class="note">No straggling rank (none over '
                     f"{step_plots.STRAGGLER:g}× the typical median step time).</p>")
    restarted = df[df["restarts"].fillna(0).astype(int) > 0]
    if not restarted.empty:
        parts.append("<p>Restarts: " + esc(", ".join(
            f"{r.experiment} ({int(r.restarts)})" for r in restarted.itertuples())) + ".</p>")
    return "".join(parts)


def _price_source(df=None) -> str:
    """What the dollar figures are priced at: the priced runs' regions, with the snapshot's source and date."""
    from core.catalog import aws_prices

    priced = df[df["hourly_usd"].notna()] if df is not None and "prices" in df else None
    labels = list(dict.fromkeys(priced["prices"].dropna())) if priced is not None else []
    return "; ".join(labels) or f"each run's region's on-demand list prices, {aws_prices.SOURCE}, {aws_prices.AS_OF}"


def cost_section(df, timelines: list | None = None) -> str:
    """Estimated cost per run, and per result (``timelines``: the runs' timeline.json, where they have one)."""
    from bench.report.bar_plots import bar_figure
    from bench.report.figures import labels

    if (df["gpu"] == "cpu").all():
        return empty_section("Cost", "none for local CPU runs (no instance to price); runs on AWS are priced at "
                             f"{_price_source()}.")
    rows = []
    for r, name in zip(records(df), labels(df)):
        unknown = "n/a (local CPU run)" if r["gpu"] == "cpu" else f"n/a ({r.get('prices') or 'price unknown'})"
        rows.append({"experiment": name, "instance_type": r["instance_type"], "nodes": r["nodes"],
                     "hourly_usd": r["hourly_usd"] if r["hourly_usd"] is not None else unknown,
                     "cost_usd": r["cost_usd"] if r["cost_usd"] is not None else unknown,
                     "usd_per_1k_samples": r["usd_per_1k_samples"] if r["usd_per_1k_samples"] is not None
                     else unknown})
    cols = [("experiment", "experiment"), ("instance_type", "instance"), ("nodes", "nodes"),
            ("hourly_usd", "USD/hour (estimate)"), ("cost_usd", "cost USD (estimate)"),
            ("usd_per_1k_samples", "USD per 1,000 samples (estimate)")]
    fig = bar_figure(df, "cost_usd", "USD (estimate)", "Estimated cost per run")
    from bench.report import cost as report_cost

    by_run = {(doc.get("stack"), doc.get("run_id")): doc for _, doc in timelines or []}
    per_result = report_cost.cost_rows(records(df), labels(df), by_run)
    return ("<h2>Cost <span class='estimate'>(estimate)</span></h2>"
            f"<p class='estimate'>Estimate: instance price × nodes × wall time, {esc(_price_source(df))}; "
            "per 1,000 samples at steady throughput. Not a bill.</p>"
            + table(rows, cols) + (figure(fig, "cost per run", "") if fig is not None else "")
            + "<h2>Cost per result <span class='estimate'>(estimate)</span></h2>"
            f"<p class='estimate'>{esc(report_cost.intro(per_result))}</p>"
            + table(per_result, report_cost.COLUMNS))


def change_section(runs) -> str:
    from bench.report import compare as report_compare

    rows = report_compare.change_rows(runs)
    if not rows:
        return empty_section("Change between runs", report_compare.NOTHING)
    return ("<h2>Change between runs</h2>" + f"<p>{esc(report_compare.INTRO)}</p>"
            + table(rows, report_compare.COLUMNS))


def what_ran_section(df) -> str:
    import json

    from bench.report.figures import labels

    out = ["<h2>What ran</h2>"]
    for r, name in zip(records(df), labels(df)):
        facts = [("stack", r["stack"]), ("run", r["run_id"]), ("started", r["started_at"]), ("image", r["image"]),
                 ("git commit", r["git_commit"]), ("results", r["results_uri"])]
        facts += [(f"device {k}", v) for k, v in (r["device"] or {}).items()]
        unknown = r.get("what_ran_unknown") or {}
        facts += [(k, v if v is not None else f"unknown: {unknown.get(k, 'not reported')}")
                  for k, v in (r.get("what_ran") or {}).items()]
        rows = [{"key": k, "value": v} for k, v in facts]
        cfg = json.dumps(r["config"] or {}, indent=1, sort_keys=True)
        cmd = " ".join(r["command"] or [])
        out.append(f"<details><summary>{esc(name)} — {esc(str(r['status']))}</summary>"
                   + table(rows, [("key", "what"), ("value", "value")])
                   + f"<p>config</p><pre>{esc(cfg)}</pre>"
                   + (f"<p>command</p><pre>{esc(cmd)}</pre>" if cmd else "") + "</details>")
    return "".join(out)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy() -> str:
    """Nothing but the page's one inline script and style sheet (by hash) and its data: images.

    A value that slipped past the escaping still could not run a script, load a resource or
    send a form. Hash sources: CSP Level 3 section 8.3 (https://www.w3.org/TR/CSP3/#match-element-to-source-list);
    a <meta> policy ignores frame-ancestors, so none is given (section 3.3).
    """
    return (f"default-src 'none'; script-src {_sha256(LOADED_SCRIPT)}; style-src {_sha256(CSS)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def cut_notes(df) -> list[str]:
    """What the figures leave out of a large run (the tables keep every row)."""
    from bench.report.bar_plots import MAX_BARS
    from bench.report.figures import MAX_CURVES
    from bench.report.step_plots import MAX_STEP_ROWS

    n = len(df)
    cut = [(MAX_BARS, "bar charts"), (MAX_CURVES, "loss plot"), (MAX_STEP_ROWS, "step-time figure")]
    return [f"the {what} show(s) the first {limit} of {n} experiment runs; the tables list all of them"
            for limit, what in cut if n > limit]


def build_html(df, steps, *, sources: list[str], baseline: str | None = None, notes: list[str] = (),
               timelines: list | None = None, runs: list | None = None, telemetry=None) -> str:
    """The whole page (draws the figures); ``timelines``: ``bench.report.timeline.load_timelines``'s;
    ``runs`` (bench.results.frames.runs) for the change between runs; ``telemetry``: ``results.telemetry``'s frame."""
    from bench.report.timeline import timeline_section

    if baseline:
        df = with_baseline(df, baseline)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = [timeline_section(timelines or [], table=table, figure=figure), summary_section(df, baseline),
                throughput_section(df), language_model_section(df, steps, figure=figure, table=table),
                scaling_section(df, figure=figure, table=table),
                repeats_section(df, figure=figure, table=table),
                fabric_section(df, figure=figure, table=table),
                steps_section(steps, df), hardware_section(df, telemetry, figure=figure, table=table),
                accuracy_section(df), change_section(runs or []),
                cost_section(df, timelines), what_ran_section(df)]
    empty = [s for s in sections if isinstance(s, EmptySection)]
    body = [f"<h1>eksbench report</h1><p class='meta'>{esc(', '.join(sources))} — generated {when}</p>",
            *(s for s in sections if not isinstance(s, EmptySection))]
    if empty:  # after what the runs show: one line each, how to get it
        body.append("<h2>Not in these results</h2>" + "".join(empty))
    notes = list(notes) + cut_notes(df)
    if notes:
        body.append("<h2>Loader warnings</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content='{attr(content_security_policy())}'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>eksbench report</title><style>{CSS}</style><script>{LOADED_SCRIPT}</script></head>"
            f"<body><main>{''.join(body)}</main></body></html>")


def write_report(sources: list[str], out: str | Path, baseline: str | None = None, *,
                 results_root: str | Path | None = None) -> Path:
    """Load, render and write; returns the path. ``sources`` and ``results_root`` are read as ``results.load``
    reads them (folders, s3:// prefixes, run handles: ``bench.results.sources``). Raises LookupError with a
    one-line reason, and ``bench.errors.NotWritten`` (an OSError) when the page cannot be written, the previous
    one left whole."""
    from bench.report.timeline import load_timelines
    from bench.results import frames as results
    from bench.results.run_frame import frame
    from bench.results.sources import resolve_sources
    from bench.results.step_frame import step_frame

    sources = resolve_sources(sources, results_root=results_root)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = results.runs(*sources)  # each rank file read once, as a stream: the steps come from the same lines
        df = frame([r for r, _ in runs])
        steps = step_frame(((r["stack"], r["run_id"], r["experiment"]), r["repeat"], lines)
                           for r, lines in runs)
        timelines = load_timelines(list(sources))
        telemetry = results.telemetry(*sources, strict=False)
    notes = list(dict.fromkeys(str(w.message) for w in caught))
    if df.empty:
        raise LookupError(f"nothing loadable under {', '.join(sources)}"
                          + (f" ({notes[0]})" if notes else " (no summary.json, metrics/ or logs/ found)"))
    if baseline and baseline not in set(df["experiment"]):
        raise LookupError(f"--baseline={baseline!r}: no such experiment; found: {', '.join(sorted(set(df['experiment'])))}")
    try:
        page = build_html(df, steps, sources=sources, baseline=baseline, notes=notes, timelines=timelines,
                          runs=runs, telemetry=telemetry)
    except KeyError:
        raise LookupError(f"--baseline={baseline!r}: no succeeded run with a throughput") from None
    path = Path(out)
    data = page.encode("utf-8")
    try:  # to a temporary file, then renamed over the page: a failed write leaves the previous page whole
        atomic_write(path.resolve(), lambda f: f.write(data))
    except OSError as e:
        raise NotWritten(path, e) from e
    for n in notes:
        print(safe(f"warning: {n}"))
    return path
