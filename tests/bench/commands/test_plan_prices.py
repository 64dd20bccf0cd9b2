"""Every cost a plan and a run's cost guard print is priced in the stack's own region and says where its prices come
from and when they hold; a type with no price there is named, never priced from another region, and a budget
(--max-cost) that cannot be checked is refused."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from bench.cli import main
from bench.cloud.preflight import Refusal, check_config, check_cost
from bench.commands.plan import render
from program.offline import evaluate_config
from program.stack_files import ROOT
from tests.program.test_program import DEV, P5_FILLED

LABEL = "on-demand list prices, SkyPilot catalog e385a0d, after the June 2025 P4/P5 price cut"
OTHER = "control plane, NAT gateways and FSx at us-west-2 list prices as of 2026-11-22"
NO_P5E = ("p5e.48xlarge has no on-demand price in us-east-1 in eksbench's price snapshot (SkyPilot catalog e385a0d, "
          "after the June 2025 P4/P5 price cut)")


def in_region(config: dict, region: str) -> dict:
    """A stack file's config moved to ``region`` (its pinned zones dropped: the plan chooses them there)."""
    moved = copy.deepcopy(config)
    moved["aws:region"] = region
    moved["eksbench:network"] = {k: v for k, v in moved["eksbench:network"].items() if k != "azs"}
    return moved


def with_gpu(config: dict, instance_type: str) -> dict:
    changed = copy.deepcopy(config)
    changed["eksbench:gpu_node_groups"][0]["instance_type"] = instance_type
    return changed


def project(tmp_path: Path, stack: str, config: dict) -> Path:
    """A project folder holding ``Pulumi.<stack>.yaml`` with ``config``, as a user's checkout would."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


@pytest.fixture(scope="module")
def p5e_project(tmp_path_factory) -> Path:
    return project(tmp_path_factory.mktemp("p5e"), "p5e", with_gpu(P5_FILLED, "p5e.48xlarge"))


def test_plan_p5_fsx_prices_p5_at_us_east_1s_figure_and_says_region_and_date(capsys, tmp_path):
    code = main(["plan", "p5-fsx", "--project-dir", str(project(tmp_path, "p5-fsx", P5_FILLED))])
    text = capsys.readouterr().out
    assert code == 0
    assert "$  110.08  gpu nodes p5 (2x p5.48xlarge)" in text  # 2 x $55.04, after AWS's June 2025 cut (not $98.32)
    assert f"instances at us-east-1 {LABEL}" in text and OTHER in text
    assert "Estimated cost: $112.74/hour on demand" in text


def test_a_us_east_1_dev_stack_is_priced_with_us_east_1_figures():
    plan = evaluate_config("dev", in_region(DEV, "us-east-1"))
    assert plan.estimate["prices"]["instances"] == f"us-east-1 {LABEL}"
    assert plan.cost_items["gpu nodes p3 (2x p3.16xlarge)"] == pytest.approx(2 * 24.48)  # us-east-1 lists $24.48/h
    assert f"instances at us-east-1 {LABEL}" in render(plan)


def test_a_stack_in_a_dearer_region_is_priced_at_that_regions_figures():
    """p3.16xlarge lists at $24.48/h in us-west-2 and $33.552/h in ap-northeast-1."""
    plan = evaluate_config("dev", in_region(DEV, "ap-northeast-1"))
    assert plan.cost_items["gpu nodes p3 (2x p3.16xlarge)"] == pytest.approx(2 * 33.552)
    assert plan.cost_items["system nodes (2x m6i.large)"] == pytest.approx(2 * 0.124)
    assert f"instances at ap-northeast-1 {LABEL}" in render(plan)


def test_a_p5e_stack_says_it_has_no_price_for_its_region_and_prices_it_from_no_other():
    plan = evaluate_config("p5e", with_gpu(P5_FILLED, "p5e.48xlarge"))
    assert plan.estimate["hourly_cost_usd"] is None and plan.outputs["estimated_hourly_cost_usd"] is None
    assert plan.cost_items["gpu nodes p5 (2x p5e.48xlarge)"] is None
    assert plan.estimate["unpriced"] == [NO_P5E]
    text = render(plan)
    assert "Estimated cost: unknown ($2.66/hour without the instances that have no price):" in text
    assert f"  ! {NO_P5E}" in text and "  no price   gpu nodes p5 (2x p5e.48xlarge)" in text
    assert plan.outputs["hourly_cost_after_autostop_usd"] == 2.66  # the system nodes, NAT, FSx: priced


def test_the_cost_guard_names_region_and_date(tmp_path):
    ready = check_config("p5-fsx", project(tmp_path, "p5-fsx", P5_FILLED))
    line = check_cost(ready, max_cost=1000.0)
    assert line.startswith("estimated $") and f"instances at us-east-1 {LABEL})" in line
    with pytest.raises(Refusal) as refused:
        check_cost(ready, max_cost=10.0)
    assert f"instances at us-east-1 {LABEL})), above --max-cost $10.00" in str(refused.value)


def test_max_cost_with_an_unpriced_type_is_refused_not_passed(p5e_project):
    ready = check_config("p5e", p5e_project)
    assert check_cost(ready, max_cost=None) == f"cost not estimated: {NO_P5E}"
    with pytest.raises(Refusal) as refused:  # a budget no estimate could break is no budget: refused, not passed
        check_cost(ready, max_cost=100_000.0)
    assert str(refused.value) == (
        f"--max-cost 100000: the run's cost cannot be estimated: {NO_P5E}; run `eksbench prices refresh` (with AWS "
        "credentials) for AWS's prices of today, or run without --max-cost")


def test_eksbench_run_with_max_cost_and_an_unpriced_type_exits_2_in_one_line(capsys, p5e_project, tmp_path):
    code = main(["run", "p5e", "--yes", "--max-cost", "100000", "--project-dir", str(p5e_project),
                 "--results-root", str(tmp_path / "results")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2
    assert err == [f"error: --max-cost 100000: the run's cost cannot be estimated: {NO_P5E}; run `eksbench prices "
                   "refresh` (with AWS credentials) for AWS's prices of today, or run without --max-cost"]


def test_a_snapshot_holding_an_absurd_price_plans_that_type_unpriced_never_at_inf(capsys, monkeypatch, tmp_path):
    """A snapshot pricing p3.16xlarge at 1e308 USD/h made `plan dev` say "$inf/hour" (and Infinity in --json)."""
    import json

    from core.catalog import aws_prices

    monkeypatch.setitem(aws_prices.USD_PER_HOUR, "p3.16xlarge", {"us-west-2": 1e308})
    assert main(["plan", "dev", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in plan --json"))
    assert doc["estimate"]["hourly_cost_usd"] is None
    assert main(["plan", "dev"]) == 0
    text = capsys.readouterr().out
    assert "Estimated cost: unknown" in text and "$inf" not in text
