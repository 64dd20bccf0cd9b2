"""``eksbench prices refresh``: the AWS Price List Query API's answers, as botocore's Stubber gives them, become the
snapshot; without credentials it is one line, exit 2, and nothing is written.

The products have GetProducts' shape: each PriceList item a JSON string (botocore's service model, member
``SynthesizedJsonPriceListJsonItem``), ``{"product": {"attributes": ...}, "terms": {"OnDemand": {...}, "Reserved":
{...}}}`` as in botocore's own example for GetProducts (``botocore/data/pricing/2017-10-15/examples-1.json``).
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from bench.cli import main
from bench.prices import pricing_api
from bench.prices.sources import SourceError
from core.catalog.aws import INSTANCE_TYPES, no_credentials
from program.stack_files import ROOT
from tests.bench.commands.test_bad_flags import no_aws_env


def product(instance_type: str, region: str, usd: str, *, reserved: str = "38.5000000000") -> str:
    sku = f"SKU{abs(hash((instance_type, region))) % 10**8}"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku,
                    "attributes": {"instanceType": instance_type, "regionCode": region, "locationType": "AWS Region",
                                   "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                                   "capacitystatus": "Used", "servicecode": "AmazonEC2"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "description": f"On Demand Linux {instance_type}",
                "pricePerUnit": {"USD": usd}}},
            "sku": sku, "effectiveDate": "2025-06-01T00:00:00Z", "offerTermCode": "JRTCKXETXF", "termAttributes": {}}},
            "Reserved": {f"{sku}.4NA7Y494T4": {"priceDimensions": {f"{sku}.4NA7Y494T4.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": reserved}}}, "offerTermCode": "4NA7Y494T4"}}},
        "version": "20250620180441", "publicationDate": "2025-06-20T18:04:41Z"})


def stubbed(pages: dict[str, list[list[str]]], regions=()) -> tuple:
    """A pricing client answering, for every catalog type in order, the pages given for it (none: one empty page)."""
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    stub = Stubber(client)
    for instance_type in INSTANCE_TYPES:
        for region in regions or [None]:
            answer = pages.get(instance_type, [[]])
            for n, items in enumerate(answer):
                expected = {"ServiceCode": "AmazonEC2", "Filters": pricing_api.product_filters(instance_type, region)}
                if n:
                    expected["NextToken"] = f"page-{n}"
                response = {"FormatVersion": "aws_v1", "PriceList": items}
                if n + 1 < len(answer):
                    response["NextToken"] = f"page-{n + 1}"
                stub.add_response("get_products", response, expected)
    return client, stub


def test_the_filters_ask_for_one_types_on_demand_linux_shared_price():
    assert pricing_api.product_filters("p5.48xlarge", "us-east-1") == [
        {"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
            ("instanceType", "p5.48xlarge"), ("operatingSystem", "Linux"), ("preInstalledSw", "NA"),
            ("licenseModel", "No License required"), ("tenancy", "Shared"), ("capacitystatus", "Used"),
            ("locationType", "AWS Region"), ("regionCode", "us-east-1"))]
    assert pricing_api.product_filters("m6i.large")[-1]["Field"] == "locationType"  # every region


def test_the_on_demand_hourly_usd_of_each_product_is_taken_reserved_and_zero_prices_are_not():
    items = [product("p5.48xlarge", "us-east-1", "55.0400000000"), product("p5.48xlarge", "us-west-1", "68.8000000000"),
             product("p5e.48xlarge", "us-east-2", "0.0000000000"), product("p5en.48xlarge", "us-east-1", "63.296")]
    assert pricing_api.prices_from_products(items, types=["p5.48xlarge", "p5e.48xlarge"]) == {
        ("p5.48xlarge", "us-east-1"): 55.04, ("p5.48xlarge", "us-west-1"): 68.8}
    twice = items[:1] + [product("p5.48xlarge", "us-east-1", "56.0000000000")]
    with pytest.raises(SourceError, match=r"p5.48xlarge in us-east-1 has 2 different on-demand prices"):
        pricing_api.prices_from_products(twice, types=["p5.48xlarge"])


@pytest.mark.parametrize("usd", ["1e308", "Infinity", "NaN", "fifty"])
def test_an_api_price_no_instance_hour_can_have_is_refused_not_written(usd):
    with pytest.raises(SourceError, match=rf"p5.48xlarge in us-east-1.*='{usd}': not a price an instance-hour can"):
        pricing_api.prices_from_products([product("p5.48xlarge", "us-east-1", usd)], types=["p5.48xlarge"])


def test_fetch_reads_every_page_of_every_type():
    client, stub = stubbed({"p5.48xlarge": [[product("p5.48xlarge", "us-east-1", "55.0400000000")],
                                            [product("p5.48xlarge", "us-west-1", "68.8000000000")]],
                            "m6i.large": [[product("m6i.large", "us-east-1", "0.0960000000")]]})
    with stub:
        prices = pricing_api.fetch(client, types=list(INSTANCE_TYPES))
        stub.assert_no_pending_responses()
    assert prices == {("m6i.large", "us-east-1"): 0.096, ("p5.48xlarge", "us-east-1"): 55.04,
                      ("p5.48xlarge", "us-west-1"): 68.8}


def test_refresh_writes_the_snapshot_dated_the_day_it_fetched(capsys, monkeypatch, tmp_path):
    client, stub = stubbed({"p5.48xlarge": [[product("p5.48xlarge", "us-east-1", "55.0400000000")]]},
                           regions=["us-east-1"])
    monkeypatch.setattr(pricing_api, "client", lambda: client)
    with stub:
        code = main(["prices", "refresh", "--region", "us-east-1", "--out", str(tmp_path / "m.py")])
    out = capsys.readouterr()
    assert code == 0, out.err
    m: dict = {}
    exec((tmp_path / "m.py").read_text(), m)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert m["USD_PER_HOUR"] == {"p5.48xlarge": {"us-east-1": 55.04}}
    assert (m["SOURCE"], m["AS_OF"], m["MADE_BY"]) == ("AWS Price List Query API", f"fetched {today}",
                                                       "eksbench prices refresh --region us-east-1")
    assert out.out.startswith(f"wrote {tmp_path / 'm.py'}: 1 prices of 1 instance types in 1 regions")


def test_refresh_without_credentials_is_one_line_exit_2_and_writes_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench", "prices", "refresh", "--out", str(tmp_path / "m.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=no_aws_env())
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["error: " + no_credentials("prices refresh")], done.stderr
    assert not Path(tmp_path / "m.py").exists() and done.stdout == ""
