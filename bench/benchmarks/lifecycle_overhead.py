"""The orchestrator's own overhead: from the last experiment summary seen to the start of ``pulumi destroy``.

``python -m bench.benchmarks.lifecycle_overhead [--runs 5 --poll 1]``

Runs ``python -m bench run <stack>`` end to end against the test double of the Pulumi engine
(``tests/support/fake_pulumi.py`` on PATH, driven by the real Automation API) and a moto server
on loopback, with two experiments whose summaries land on S3 shortly after ``up``. Reports, per
run: ``seen_to_destroy_s`` (what bench prints as "tearing down Xs after the last result
arrived": the orchestrator's own overhead once it knows the run is over), and
``written_to_destroy_cli_s`` (summary.json written by the fake Job -> the ``pulumi destroy``
process started, from the fake's timestamped call log: adds the S3 poll interval, --poll, and
the CLI start). Needs moto (requirements-dev.txt); no AWS account, no Pulumi CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--poll", type=float, default=1.0, help="bench run --poll (seconds between S3 checks)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))  # the test double of the Pulumi engine and its stack file live in tests/
    server = start_moto()
    results = []
    try:
        for i in range(args.runs):
            measured = one_run(i, poll=args.poll)
            if measured is None:
                return 1
            results.append(measured)
            print(json.dumps(results[-1]), flush=True)
    finally:
        server.stop()
    print(json.dumps(medians(results, poll=args.poll), indent=1))
    return 0


def start_moto() -> Any:
    """A moto server on a free loopback port, started, with this process's AWS settings pointed at it."""
    import logging

    from moto.server import ThreadedMotoServer

    from bench.local.etcd import free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x",
                      AWS_DEFAULT_REGION="us-east-1")
    return server


def one_run(i: int, *, poll: float) -> dict[str, float] | None:
    """Run ``i``: ``bench run`` end to end in a folder of its own, removed after; its two overheads, or None (its
    output printed on stderr) where it failed."""
    import boto3

    tmp = Path(tempfile.mkdtemp(prefix="eksbench-lifecycle-bench-"))
    try:
        bucket = f"bench-{i}"
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
        project = write_project(tmp, bucket)
        done = run_bench(tmp, project, fake_scenario(bucket), poll=poll)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return None
        return overheads(done.stdout, tmp / "state" / "calls.jsonl")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_project(tmp: Path, bucket: str) -> Path:
    """``tmp/project`` with Pulumi.yaml and the stack ``lc`` writing to ``bucket``, and ``tmp/bin/pulumi``, the
    fake engine; returns the project folder."""
    import yaml

    from tests.lifecycle.conftest import FAKE, stack_config

    project = tmp / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project)
    cfg = stack_config()
    cfg["config"]["eksbench:results"] = {"bucket": bucket}
    (project / "Pulumi.lc.yaml").write_text(yaml.safe_dump(cfg))
    (tmp / "bin").mkdir()
    (tmp / "bin" / "pulumi").write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    (tmp / "bin" / "pulumi").chmod(0o755)
    return project


def fake_scenario(bucket: str) -> dict[str, Any]:
    """What the fake engine plays: the program's outputs, and two experiments whose summaries land 1 s and 2 s
    after ``up``."""
    from core.contract.results_location import ResultsLocation

    run = ResultsLocation(bucket, "eksbench", "lc", "r1")  # what the program exports
    outputs = {"cluster_name": "eksbench-lc", "results_prefix": run.uri, "node_groups": ["s", "g"],
               "experiment_results": {n: run.child(n).uri for n in ("alpha", "beta")}}
    return {"outputs": outputs, "up_step_s": 0.02,
            "experiments": {"alpha": {"uri": run.child("alpha").uri, "after": 1.0},
                            "beta": {"uri": run.child("beta").uri, "after": 2.0}}}


def run_bench(tmp: Path, project: Path, scenario: dict[str, Any], *, poll: float) -> subprocess.CompletedProcess:
    """``python -m bench run lc --yes`` on the project, with the fake engine first on PATH."""
    env = dict(os.environ, PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
               PULUMI_BACKEND_URL=f"file://{tmp / 'state'}", PULUMI_CONFIG_PASSPHRASE="x",
               FAKE_PULUMI_STATE=str(tmp / "state"), FAKE_PULUMI_SCENARIO=json.dumps(scenario),
               PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bench", "run", "lc", "--yes",
                           "--project-dir", str(project), "--results-root", str(tmp / "results"),
                           "--poll", str(poll)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def overheads(stdout: str, calls: Path) -> dict[str, float]:
    """The run's two figures: what bench printed as its teardown delay, and summary written -> destroy started,
    from the fake engine's timestamped call log."""
    seen = float(re.search(r"tearing down ([0-9.]+)s after the last result", stdout).group(1))
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    written = max(c["t"] for c in logged if c.get("event") == "summary-written")
    destroy = min(c["t"] for c in logged if "argv" in c and "destroy" in c["argv"])
    return {"seen_to_destroy_s": seen, "written_to_destroy_cli_s": round(destroy - written, 3)}


def medians(results: list[dict[str, float]], *, poll: float) -> dict[str, Any]:
    """The runs' medians and maxima, with the machine and date they were measured on."""
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    return {"runs": len(results), "poll_s": poll, "median": med,
            "max": {k: max(r[k] for r in results) for k in results[0]},
            "machine": f"{platform.machine()} {os.cpu_count()} CPUs", "python": platform.python_version(),
            "date": datetime.now(timezone.utc).date().isoformat()}


if __name__ == "__main__":
    raise SystemExit(main())
