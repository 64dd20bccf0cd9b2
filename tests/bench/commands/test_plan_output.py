"""What `eksbench plan` prints tells what is real: the values the mock engine made up are labelled as such, a
warning is said once, whole, under the setting that chose what it warns about, and a home stack's plan gives what
its bucket costs by use."""

from __future__ import annotations

import copy

import pytest

from bench.commands.plan import PLACEHOLDER, render
from core.catalog import aws as catalog
from program.offline import evaluate, evaluate_config, storage_prices
from tests.program.test_program import DEV


@pytest.fixture(scope="module")
def dev():
    return evaluate("dev")


@pytest.fixture(scope="module")
def home():
    return evaluate("home")


def output_line(text: str, key: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [key])


def test_every_output_the_mock_engine_made_up_is_labelled_and_no_other(dev):
    text = render(dev)
    for key in ("results_bucket", "results_prefix", "dataset_uri", "storage_id", "node_groups"):
        assert output_line(text, key).endswith(PLACEHOLDER), key
    for key in ("cluster_name", "region", "storage_kind", "mount_path", "estimated_hourly_cost_usd"):
        assert PLACEHOLDER not in output_line(text, key), key
    assert "pulumi up` exports the real one" in text


def test_the_json_plan_lists_the_made_up_outputs_and_keeps_the_outputs_as_they_were(dev):
    doc = dev.as_json()
    assert set(doc["placeholders"]) == {"results_bucket", "results_prefix", "experiment_results", "dataset_uri",
                                        "storage_id", "node_groups"}
    assert doc["outputs"]["results_bucket"] == "eksbench-home-20261122"  # the value itself, unlabelled
    assert doc["outputs"]["storage_id"].startswith("fs-")


def test_a_bucket_the_stack_file_names_is_no_placeholder():
    config = copy.deepcopy(DEV)
    config["eksbench:results"] = {"bucket": "acme-ml-results"}
    plan = evaluate_config("dev", config)
    assert plan.outputs["results_bucket"] == "acme-ml-results"
    assert "results_bucket" not in plan.placeholders and "storage_id" in plan.placeholders


def test_the_home_stacks_made_up_names_are_labelled(home):
    assert set(home.placeholders) == {"bucket", "datasets_uri", "results_uri", "ecr_repository_url"}


def test_a_default_images_warning_is_said_once_under_the_instance_type_that_chose_it_and_whole(dev):
    patch = [w for w in dev.warnings if "left AWS's patch support" in w]
    assert len(patch) == 1
    assert patch[0].startswith('gpu_node_groups[0].instance_type="p3.16xlarge": the default image it gives '
                               "resnet50-synthetic, cifar10-elastic (no image: set)")
    assert not [w for w in dev.warnings if w.startswith("experiments[")]  # keys the stack file never sets
    assert not [w for w in dev.warnings if w.endswith(":")]  # none stops before what it says to do
    assert sum(f"! {w}" in render(dev) for w in dev.warnings) == len(dev.warnings)  # each printed in full


def test_the_home_stacks_plan_gives_s3_storage_and_request_prices_of_its_region_with_their_source(home):
    text = render(home)
    prices = catalog.S3_STANDARD_PRICES["us-west-2"]
    assert "at us-west-2 prices (AWS Price List, AmazonS3 us-west-2, version 20260918174747)" in text
    assert f"${prices.usd_per_gb_month:g} per GB-month stored (S3 Standard" in text
    assert f"${prices.usd_per_1000_writes:g} per 1,000 PUT, COPY, POST or LIST requests" in text
    assert f"${prices.usd_per_1000_reads:g} per 1,000 GET and other requests" in text
    assert home.as_json()["estimate"]["storage_prices"]["s3_usd_per_gb_month"] == prices.usd_per_gb_month


def test_a_region_with_no_s3_price_is_said_so_never_priced_from_another():
    assert "ap-south-2" not in catalog.S3_STANDARD_PRICES
    unknown = storage_prices("ap-south-2")
    assert unknown["s3_usd_per_gb_month"] is None and unknown["s3_usd_per_1000_get_and_other"] is None
    assert unknown["source"].startswith("no S3 price for ap-south-2 in eksbench's catalog")
