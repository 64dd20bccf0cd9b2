"""``eksbench report SOURCE... [--out report.html] [--baseline EXPERIMENT]``: one HTML page.

Loads the sources with ``bench.results.frames`` (local folders or s3:// prefixes, any level) and
writes a single self-contained HTML file (figures are embedded PNGs, no network needed):
where a cloud run's time went (``timeline.json``: minutes to the first step, GPU node-minutes billed
while nothing stepped, each phase drawn), summary table, throughput, scaling efficiency (against the published anchor), repeats with
their confidence intervals, the
all-reduce bus bandwidth and fabric flags (``bench.report.fabric``), loss curves, step-time
distributions with restarts and stragglers, time to accuracy, the change between runs of an
experiment (``bench.report.compare``), estimated cost and cost per result (``bench.report.cost``),
and what ran (config, image, versions, driver, instance, commit). ``--baseline`` adds each run's
throughput as a ratio to that experiment's.
pandas and matplotlib are imported inside the command, so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench.errors import NotWritten, fail
from bench.project import add_results_root_option, out_file_problem
from bench.report.page import write_report
from bench.results.sources import no_source, resolve_source
from core.contract.results_location import HANDLE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="write one HTML page of results: throughput, scaling, curves, cost",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write a self-contained HTML page (figures embedded, no network needed) of one or more results\n"
                    "folders or s3:// prefixes, at any level: a stack's runs, one run, one experiment. It shows\n"
                    "where a cloud run's time went, a summary table, throughput and scaling efficiency, repeats\n"
                    "with their confidence intervals, all-reduce bus bandwidth, loss curves, step-time spreads,\n"
                    "time to accuracy, the change between runs, the cost, and what ran (image, versions, commit).",
        epilog="examples:\n  eksbench report dev\n"
               "  eksbench report dev/20261127-091228 --out run.html --baseline resnet50-synthetic\n"
               "  eksbench report s3://my-results/dev/run-7")
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help=f"a run handle ({HANDLE}, under --results-root), a results folder or an s3:// prefix: a "
                        "stack's runs (dev, results/dev), a run or one experiment")
    p.add_argument("--out", default="report.html", metavar="FILE",
                   help="the HTML file (default: report.html); replaced whole, or left as it was if writing fails")
    p.add_argument("--baseline", metavar="EXPERIMENT", help="add each run's throughput as a ratio to this experiment's")
    add_results_root_option(p)
    p.set_defaults(func=main)


def main(args) -> int:
    sources = [resolve_source(s, results_root=args.results_root) for s in args.sources]
    if None in sources:
        return fail(no_source(args.sources[sources.index(None)], results_root=args.results_root))
    if unusable := out_file_problem(args.out):  # before the page is built: a folder, no folder, no permission
        return fail(unusable)
    started = time.perf_counter()
    try:
        path = write_report(sources, args.out, args.baseline)
    except LookupError as e:
        return fail(str(e).strip("'\""))
    except NotWritten as e:  # the disk filled, a quota: the previous page is whole
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB) in {time.perf_counter() - started:.1f}s")
    return 0
