"""The files a price snapshot is built from, each read into one shape: ``{(instance type, region): USD/h or None}``.

Every reader streams its file through the standard library's ``csv`` (the offer file of us-east-1 holds millions of
rows) and keeps only the instance types asked for. None is a type the source lists in a region without a price.
Two different prices for one type and region stop the build: the reader never picks one.

- ``read_offer_csv``: the AWS Price List bulk offer file of one region,
  ``https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/<region>/index.csv``, the file
  SkyPilot's catalog is built from (skypilot-org/skypilot ``sky/catalog/data_fetchers/fetch_aws.py``,
  ``_get_pricing_table``). AWS: "The first five rows of the CSV file contain the metadata for the price list file.
  The sixth row has the column names" (AWS Billing user guide, "Reading the service price list file for an AWS
  service"); SkyPilot reads it with ``pandas.read_csv(url, skiprows=5)``. The rows kept are SkyPilot's: on-demand
  terms, Linux, no pre-installed software (the file says ``NA``, which pandas reads as null: SkyPilot's ``isnull()``),
  used capacity (not an unused reservation), a price above zero; and shared tenancy only, where SkyPilot's filter also
  admits ``Host`` (Dedicated Hosts): the node groups eksbench makes run on shared tenancy. Per hour and in USD, as
  the ``Unit`` and ``Currency`` columns say.
- ``read_vms_csv``: SkyPilot's catalog, ``catalogs/v8/aws/vms.csv`` in skypilot-org/skypilot-catalog: one row per
  type, region and availability zone; ``Price`` (on-demand USD/h) is empty where SkyPilot's join found no price.
- ``read_table_csv``: the table kept beside the snapshot (``core/catalog/sources/aws-on-demand.csv``, described by
  ``aws-on-demand.md`` there): one row per type and region, ``usd_per_hour`` copied from ``vms.csv``'s ``Price``.
"""

from __future__ import annotations

import csv
from typing import Collection, Iterable

from core.catalog.aws import PLAUSIBLE_USD_PER_HOUR, plausible_price

Prices = dict[tuple[str, str], float | None]

OFFER_PREAMBLE_ROWS = 5  # metadata rows before the column names (AWS Billing user guide, above)
OFFER = "AWS Price List offer file"
VMS = "SkyPilot vms.csv"
TABLE = "eksbench price table"
# Columns each format needs, by format (a file's first row tells the format: ``detect``).
OFFER_COLUMNS = ("Instance Type", "TermType", "Operating System", "Pre Installed S/W", "CapacityStatus", "Tenancy",
                 "Unit", "Currency", "PricePerUnit")
VMS_COLUMNS = ("InstanceType", "Price", "Region", "AvailabilityZone")
TABLE_COLUMNS = ("instance_type", "region", "usd_per_hour")


class SourceError(ValueError):
    """A source file that cannot be read as its format: ``str()`` is one line naming the file and what is wrong."""


def detect(first_row: list[str], name: str) -> str:
    """Which format a file is, from its first CSV row."""
    if first_row[:1] == ["FormatVersion"]:
        return OFFER
    if set(VMS_COLUMNS) <= set(first_row):
        return VMS
    if set(TABLE_COLUMNS) <= set(first_row):
        return TABLE
    raise SourceError(f"{name}: not a price file eksbench reads: its first row {_cut(first_row)} is neither an AWS "
                      f"Price List offer file's (\"FormatVersion\",...), SkyPilot vms.csv's header "
                      f"({', '.join(VMS_COLUMNS)}, ...) nor an eksbench price table's ({', '.join(TABLE_COLUMNS)})")


def read_offer_csv(lines: Iterable[str], *, name: str, types: Collection[str],
                   region: str | None = None) -> tuple[Prices, str | None]:
    """(prices, the file's publication date ``YYYY-MM-DD`` or None) from one region's bulk offer file. The region
    is each row's ``Region Code``; ``region`` stands in where the file has no such column."""
    rows = csv.reader(lines)
    meta = _offer_preamble(rows, name)
    header = next(rows, None)
    if header is None:
        raise SourceError(f"{name}: ends after its metadata rows, before the column names")
    col = _columns(header, OFFER_COLUMNS, name)
    code = header.index("Region Code") if "Region Code" in header else None
    if code is None and not region:
        raise SourceError(f"{name}: no \"Region Code\" column; give the file's region (--region us-east-1)")
    found: dict[tuple[str, str], set[float]] = {}
    for n, row in enumerate(rows, start=OFFER_PREAMBLE_ROWS + 2):
        if len(row) < len(header) or row[col["Instance Type"]] not in types:
            continue
        if not _on_demand_linux_shared(row, col):
            continue
        usd = price(row[col["PricePerUnit"]], f"{name} row {n}, PricePerUnit", zero=True)
        if usd > 0:
            key = (row[col["Instance Type"]], row[code] if code is not None else region)
            found.setdefault(key, set()).add(usd)
    published = meta.get("Publication Date", "")[:10] or None
    return _one_price_each(found, name), published


def _offer_preamble(rows, name: str) -> dict[str, str]:
    meta = {}
    for _ in range(OFFER_PREAMBLE_ROWS):
        row = next(rows, None)
        if row is None or len(row) != 2:
            raise SourceError(f"{name}: an AWS Price List offer file opens with {OFFER_PREAMBLE_ROWS} metadata rows "
                              f"(\"FormatVersion\",\"v1.0\" ... \"OfferCode\",\"AmazonEC2\"); found {_cut(row)}")
        meta[row[0]] = row[1]
    if meta.get("OfferCode") not in (None, "AmazonEC2"):
        raise SourceError(f"{name}: OfferCode is {meta['OfferCode']!r}; instance prices are in AmazonEC2's offer file")
    return meta


def _on_demand_linux_shared(row: list[str], col: dict[str, int]) -> bool:
    return (row[col["TermType"]] == "OnDemand" and row[col["Operating System"]] == "Linux"
            and row[col["Pre Installed S/W"]] in ("NA", "") and row[col["CapacityStatus"]] == "Used"
            and row[col["Tenancy"]] == "Shared" and row[col["Unit"]] == "Hrs" and row[col["Currency"]] == "USD")


def read_vms_csv(lines: Iterable[str], *, name: str, types: Collection[str]) -> Prices:
    """Prices from SkyPilot's ``vms.csv``: each type and region's ``Price``, which every zone's row must agree on."""
    return _per_region(lines, name=name, types=types, needed=VMS_COLUMNS, keys=("InstanceType", "Region", "Price"))


def read_table_csv(lines: Iterable[str], *, name: str, types: Collection[str]) -> Prices:
    """Prices from the table kept beside the snapshot: one row per type and region."""
    return _per_region(lines, name=name, types=types, needed=TABLE_COLUMNS,
                       keys=("instance_type", "region", "usd_per_hour"))


def _per_region(lines: Iterable[str], *, name: str, types: Collection[str], needed: tuple[str, ...],
                keys: tuple[str, str, str]) -> Prices:
    """A CSV with a header: its rows' (type, region, price) columns named by ``keys``; an empty price is None."""
    type_key, region_key, price_key = keys
    rows = csv.DictReader(lines)
    _columns(rows.fieldnames or [], needed, name)
    found: dict[tuple[str, str], set[float | None]] = {}
    for n, row in enumerate(rows, start=2):
        if row[type_key] in types:
            usd = price(row[price_key], f"{name} row {n}, {price_key}") if row[price_key] else None
            found.setdefault((row[type_key], row[region_key]), set()).add(usd)
    return _one_price_each(found, name)


def _columns(header: list[str], needed: tuple[str, ...], name: str) -> dict[str, int]:
    missing = [c for c in needed if c not in header]
    if missing:
        raise SourceError(f"{name}: no column {', '.join(repr(c) for c in missing)} in its header {_cut(header)}")
    return {c: header.index(c) for c in needed}


def price(text: str, where: str, *, zero: bool = False) -> float:
    """A price in USD an instance-hour can have (``core.catalog.aws.PLAUSIBLE_USD_PER_HOUR``), or with ``zero``
    also 0 (AWS's price of a term that is not charged, which its readers drop); SourceError for anything else."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not (zero and value == 0) and not plausible_price(value):
        low, high = PLAUSIBLE_USD_PER_HOUR
        raise SourceError(f"{where}={text[:40]!r}: not a price an instance-hour can have (a number of USD from "
                          f"{low:g} to {high:g}, e.g. 55.04)")
    return value


def _one_price_each(found: dict[tuple[str, str], set], name: str) -> Prices:
    out: Prices = {}
    for (instance_type, region), prices in sorted(found.items()):
        if len(prices) > 1:
            shown = ", ".join("none" if p is None else repr(p) for p in sorted(prices, key=lambda p: (p is None, p)))
            raise SourceError(f"{name}: {instance_type} in {region} has {len(prices)} different on-demand prices "
                              f"({shown}); a snapshot keeps one, so look at the source's rows for it")
        out[(instance_type, region)] = next(iter(prices))
    return out


def _cut(row: list[str] | None) -> str:
    text = "nothing" if row is None else ",".join(row)
    return repr(text if len(text) <= 80 else text[:80] + "...")
