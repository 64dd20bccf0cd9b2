"""The README is held to the product: it stays short, every `eksbench` command in it parses with the real parser,
the offline ones run as written (in a copy of the project, in the README's order), its Python runs, and the
figures it and docs/AWS.md quote are the ones the code computes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser
from tests.support.readme_steps import blocks, commands, offline
from tests.test_import_graph import ROOT

README = ROOT / "README.md"
MAX_LINES = 250


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; the rest belongs in docs/"


def test_the_readme_links_resolve():
    text = README.read_text()
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)", text)
    assert targets and not [t for t in targets if not (ROOT / t).exists()]


def test_every_readme_command_parses():
    found = commands(README.read_text())
    assert "eksbench run dev --local" in found and any(c.startswith("eksbench compare") for c in found)
    parser = build_parser()
    for line in found:
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit as e:
            pytest.fail(f"README command does not parse (exit {e.code}): {line}")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project's stack files: runs land in its results/, not the checkout's."""
    where = tmp_path_factory.mktemp("project")
    for f in ROOT.glob("Pulumi*.yaml"):
        shutil.copy(f, where / f.name)
    return where


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent", "MPLBACKEND": "Agg"}
    env = {k: v for k, v in env.items() if not k.startswith(("AWS_ACCESS", "AWS_SECRET", "AWS_SESSION", "AWS_PROFILE",
                                                             "EKSBENCH_PROJECT"))}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.local_run
def test_the_offline_commands_run_as_written(project):
    """In the README's order: the local run first, so status, logs, report and compare have results to read."""
    ran = []
    for line in commands(README.read_text()):
        argv = shlex.split(line)[1:]
        if not offline(argv):
            continue
        done = run([sys.executable, "-m", "bench", *argv], project)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, f"{line}:\n{done.stderr[-2000:]}"
        ran.append(argv[0])
    assert {"run", "status", "logs", "report", "compare", "plan"} <= set(ran)
    assert (project / "report.html").stat().st_size > 10_000
    for block in blocks(README.read_text(), "python"):
        if "automation.run(" in block:  # the AWS lifecycle
            continue
        done = run([sys.executable, "-c", block.replace("automation.plan", "automation.plan")], project)
        assert done.returncode == 0, f"README python block failed:\n{block}\n{done.stderr[-2000:]}"


# --- the figures the docs quote ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plans():
    from program.offline import evaluate, evaluate_config
    from tests.program.test_program import P5_FILLED

    return {"dev": evaluate("dev"), "p5-fsx": evaluate_config("p5-fsx", P5_FILLED)}


def gpu_usd(plan) -> float:
    return sum(usd for item, usd in plan.cost_items.items() if item.startswith("gpu nodes"))


def quoted(path: Path, pattern: str) -> float:
    text = " ".join(path.read_text().split())
    m = re.search(pattern, text)
    assert m, f"{path.name}: no match for {pattern!r}"
    return float(m.group(1))


FIGURES = [
    (README, r"dev stack costs about \$([\d.]+) an hour", lambda p: p["dev"].estimate["hourly_cost_usd"]),
    (README, r"\$([\d.]+) of it for its two p3.16xlarge", lambda p: gpu_usd(p["dev"])),
    (README, r"What is left bills about \$([\d.]+)/h for dev", lambda p: p["dev"].outputs["hourly_cost_after_autostop_usd"]),
    (README, r"two p3.16xlarge need (\d+)", lambda p: 2 * __import__("core.catalog.aws", fromlist=["x"])
     .INSTANCE_TYPES["p3.16xlarge"].vcpus),
    (ROOT / "docs/AWS.md", r"dev: \$([\d.]+) of its", lambda p: gpu_usd(p["dev"])),
    (ROOT / "docs/AWS.md", r"of its \$([\d.]+)/h\)", lambda p: p["dev"].estimate["hourly_cost_usd"]),
    (ROOT / "docs/AWS.md", r"so about \$([\d.]+)/h for dev", lambda p: p["dev"].outputs["hourly_cost_after_autostop_usd"]),
    (ROOT / "docs/AWS.md", r"control plane \(\$([\d.]+)/h\)", lambda p: p["dev"].cost_items["EKS control plane"]),
    (ROOT / "docs/AWS.md", r"the NAT gateway \(\$([\d.]+)/h\)", lambda p: p["dev"].cost_items["NAT gateways (1)"]),
    (ROOT / "docs/AWS.md", r"m6i.large, \$([\d.]+)/h\)", lambda p: p["dev"].cost_items["system nodes (2x m6i.large)"]),
    (ROOT / "docs/AWS.md", r"p5-fsx: \$([\d.]+)/h more",
     lambda p: next(usd for item, usd in p["p5-fsx"].cost_items.items() if item.startswith("FSx"))),
    (ROOT / "docs/AWS.md", r"p5-fsx: \$[\d.]+/h more, \$([\d.]+)/h in all",
     lambda p: p["p5-fsx"].outputs["hourly_cost_after_autostop_usd"]),
    (ROOT / "BENCHMARKS.md", r"\| dev \(2x p3.16xlarge, EFS\) \|[^|]*\| \$([\d.]+)/h",
     lambda p: p["dev"].estimate["hourly_cost_usd"]),
    (ROOT / "BENCHMARKS.md", r"\| p5-fsx \(2x p5.48xlarge, FSx 4.8 TiB\) \|[^|]*\| \$([\d.]+)/h",
     lambda p: p["p5-fsx"].estimate["hourly_cost_usd"]),
]


@pytest.mark.parametrize("path,pattern,compute", FIGURES, ids=[f"{p.name}:{pat[:30]}" for p, pat, _ in FIGURES])
def test_each_quoted_figure_is_the_codes(plans, path, pattern, compute):
    assert quoted(path, pattern) == pytest.approx(compute(plans), abs=0.005)
