"""The three files a price snapshot is built from, each read on a small fixture of its own format.

fixtures/offer-us-east-1.csv has the AWS Price List bulk offer file's shape (five metadata rows, then the column names;
its columns trimmed to the ones read, in the real file's order, plus a few beside them); the rows to be left out
(Reserved, Windows, Dedicated, Host, an unused reservation, SQL Server pre-installed, storage) carry made-up prices.
fixtures/vms.csv has SkyPilot's vms.csv columns and one row per zone; fixtures/table.csv is the table kept in
core/catalog/sources/, for the same types and regions as vms.csv.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.prices.sources import (
    OFFER,
    TABLE,
    VMS,
    SourceError,
    detect,
    read_offer_csv,
    read_table_csv,
    read_vms_csv,
)

FIXTURES = Path(__file__).parent / "fixtures"
TYPES = ("m6i.large", "p5.48xlarge", "p5e.48xlarge")  # p5en and p6-b200 are in the files, not asked for


def read(name: str, reader, **kw):
    with open(FIXTURES / name, newline="") as f:
        return reader(f, name=name, types=TYPES, **kw)


def test_the_offer_file_gives_the_on_demand_linux_shared_price_and_its_publication_date():
    prices, published = read("offer-us-east-1.csv", read_offer_csv)
    assert prices == {("m6i.large", "us-east-1"): 0.096, ("p5.48xlarge", "us-east-1"): 55.04}
    assert published == "2025-06-20"


def test_the_offer_file_must_open_with_its_metadata_rows():
    text = (FIXTURES / "offer-us-east-1.csv").read_text().splitlines(keepends=True)
    with pytest.raises(SourceError, match=r"opens with 5 metadata rows"):
        read_offer_csv(text[5:], name="no-preamble.csv", types=TYPES)  # the header taken for metadata: refused
    with pytest.raises(SourceError, match=r"no column 'CapacityStatus'"):
        read_offer_csv(text[:5] + [text[5].replace('"CapacityStatus"', '"Capacity"')] + text[6:], name="x.csv",
                       types=TYPES)


def test_an_offer_file_without_region_codes_needs_its_region():
    text = [line.rsplit(",", 1)[0] + "\n" for line in (FIXTURES / "offer-us-east-1.csv").read_text().splitlines()]
    text[:5] = (FIXTURES / "offer-us-east-1.csv").read_text().splitlines(keepends=True)[:5]
    with pytest.raises(SourceError, match=r'no "Region Code" column; give the file\'s region \(--region us-east-1\)'):
        read_offer_csv(text, name="old.csv", types=TYPES)
    prices, _ = read_offer_csv(text, name="old.csv", types=TYPES, region="us-east-1")
    assert prices[("p5.48xlarge", "us-east-1")] == 55.04


def test_two_prices_for_one_type_and_region_stop_the_build():
    text = (FIXTURES / "offer-us-east-1.csv").read_text()
    twice = text + text.splitlines()[6].replace("55.0400000000", "56.0000000000") + "\n"
    with pytest.raises(SourceError, match=r"p5.48xlarge in us-east-1 has 2 different on-demand prices \(55.04, 56.0\)"):
        read_offer_csv(io.StringIO(twice), name="twice.csv", types=TYPES)


def test_vms_csv_gives_each_regions_price_once_and_none_where_skypilot_found_none():
    assert read("vms.csv", read_vms_csv) == {("m6i.large", "us-east-1"): 0.096, ("m6i.large", "us-west-1"): 0.112,
                                             ("p5.48xlarge", "us-east-1"): 55.04, ("p5.48xlarge", "us-west-1"): 68.8,
                                             ("p5e.48xlarge", "us-east-2"): None}


def test_zones_of_one_region_that_disagree_stop_the_build():
    lines = (FIXTURES / "vms.csv").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(",0.096,", ",0.097,")
    with pytest.raises(SourceError, match=r"m6i.large in us-east-1 has 2 different on-demand prices \(0.096, 0.097\)"):
        read_vms_csv(lines, name="vms.csv", types=TYPES)


def test_the_table_reads_as_the_vms_csv_it_was_copied_from():
    assert read("table.csv", read_table_csv) == read("vms.csv", read_vms_csv)


def test_a_price_that_is_not_a_number_is_named():
    for value in ("-55", "fifty", "inf"):
        bad = f"instance_type,region,usd_per_hour\np5.48xlarge,us-east-1,{value}\n"
        with pytest.raises(SourceError, match=rf"bad.csv row 2, usd_per_hour='{value}': not a price") as e:
            read_table_csv(io.StringIO(bad), name="bad.csv", types=TYPES)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["1e308", "1e6", "1001", "0", "0.0000001", "nan"])
def test_a_price_no_instance_hour_can_have_is_refused_with_the_range(value):
    """A table pricing p5 at 1e308 USD/h once built, and the plan then said "$inf/hour"."""
    bad = f"instance_type,region,usd_per_hour\np5.48xlarge,us-east-1,{value}\n"
    with pytest.raises(SourceError, match=rf"usd_per_hour='{value}': not a price an instance-hour can have \(a "
                                          r"number of USD from 0.001 to 1000, e.g. 55.04\)"):
        read_table_csv(io.StringIO(bad), name="bad.csv", types=TYPES)


def test_a_files_first_row_tells_its_format():
    first = {name: (FIXTURES / name).read_text().splitlines()[0] for name in ("offer-us-east-1.csv", "vms.csv",
                                                                              "table.csv")}
    import csv

    assert [detect(next(csv.reader([line])), n) for n, line in first.items()] == [OFFER, VMS, TABLE]
    with pytest.raises(SourceError, match=r"notes.csv: not a price file eksbench reads"):
        detect(["name", "price"], "notes.csv")
