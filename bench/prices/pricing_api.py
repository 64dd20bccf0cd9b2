"""Prices from the AWS Price List Query API: ``pricing.get_products`` for each of the catalog's instance types.

The request (botocore's service model, ``botocore/data/pricing/2017-10-15/service-2.json``): ``ServiceCode``
``AmazonEC2`` and up to 50 ``Filters``, each ``{"Type": "TERM_MATCH", "Field": <attribute>, "Value": <value>}``;
the answer pages through ``NextToken`` (its paginator's ``result_key`` is ``PriceList``). The client is made in
us-east-1, where the Query API answers for the prices of every region (Pulumi's ``aws.pricing.getProduct``: "only
available in a us-east-1 or ap-south-1 provider"; SkyPilot reads the bulk files from us-east-1's endpoint too).
The filters are those of AWS's own example for one Linux instance's on-demand price (Pulumi's
``aws.pricing.getProduct``, whose data source calls GetProducts): ``instanceType``, ``operatingSystem`` Linux,
``preInstalledSw`` NA, ``licenseModel`` No License required, ``tenancy`` Shared, ``capacitystatus`` Used; and
``locationType`` "AWS Region", which leaves out Local and Wavelength Zones.

Each ``PriceList`` item is one product as a JSON string (the member is ``SynthesizedJsonPriceListJsonItem``, a
string; botocore's example for GetProducts shows it):
``{"product": {"productFamily", "attributes": {"instanceType", "regionCode", "location", ...}, "sku"},
"serviceCode", "terms": {"OnDemand": {"<sku>.<offerTermCode>": {"priceDimensions": {"<rateCode>": {"unit": "Hrs",
"pricePerUnit": {"USD": "55.0400000000"}, ...}}, "effectiveDate", ...}}, "Reserved": {...}},
"version", "publicationDate"}``. ``prices_from_products`` is pure; ``fetch`` makes the calls.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from bench.prices.sources import Prices, SourceError, price

SERVICE_CODE = "AmazonEC2"
CLIENT_REGION = "us-east-1"
SOURCE = "AWS Price List Query API"
FILTERS = (("operatingSystem", "Linux"), ("preInstalledSw", "NA"), ("licenseModel", "No License required"),
           ("tenancy", "Shared"), ("capacitystatus", "Used"), ("locationType", "AWS Region"))


def product_filters(instance_type: str, region: str | None = None) -> list[dict[str, str]]:
    """GetProducts' ``Filters`` for one type's on-demand Linux products, in ``region`` or in every region."""
    pairs = [("instanceType", instance_type), *FILTERS] + ([("regionCode", region)] if region else [])
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in pairs]


def prices_from_products(items: Iterable[str | dict[str, Any]], *, types: Sequence[str]) -> Prices:
    """``{(type, region): USD/h}`` from GetProducts' ``PriceList`` items: each product's on-demand hourly USD
    price above zero. Two different prices for one type and region raise SourceError (never one picked)."""
    found: dict[tuple[str, str], set[float]] = {}
    for item in items:
        doc = json.loads(item) if isinstance(item, str) else item
        attributes = (doc.get("product") or {}).get("attributes") or {}
        instance_type, region = attributes.get("instanceType"), attributes.get("regionCode")
        if instance_type not in types or not region:
            continue
        for price in _hourly_usd(doc.get("terms") or {}, f"{SOURCE}: {instance_type} in {region}"):
            found.setdefault((instance_type, region), set()).add(price)
    out: Prices = {}
    for (instance_type, region), prices in sorted(found.items()):
        if len(prices) > 1:
            raise SourceError(f"{SOURCE}: {instance_type} in {region} has {len(prices)} different on-demand prices "
                              f"({', '.join(map(repr, sorted(prices)))}); a snapshot keeps one")
        out[(instance_type, region)] = prices.pop()
    return out


def _hourly_usd(terms: dict[str, Any], where: str) -> list[float]:
    """Each on-demand hourly USD price above zero; SourceError for one no instance-hour can have (``price``)."""
    out = []
    for term in (terms.get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            if dim.get("unit") == "Hrs" and usd is not None and (value := price(usd, where, zero=True)) > 0:
                out.append(value)
    return out


def fetch(pricing: Any, *, types: Sequence[str], regions: Sequence[str] = ()) -> Prices:
    """Every type's prices, from a boto3 ``pricing`` client (one paginated GetProducts per type, or per type and
    region where ``regions`` are given). botocore's errors (no credentials, access denied) go to the caller."""
    paginator = pricing.get_paginator("get_products")
    items: list[str] = []
    for instance_type in types:
        for region in regions or [None]:
            for page in paginator.paginate(ServiceCode=SERVICE_CODE, Filters=product_filters(instance_type, region)):
                items += page.get("PriceList") or []
    return prices_from_products(items, types=types)


def client() -> Any:
    import boto3

    pricing = boto3.client("pricing", region_name=CLIENT_REGION)
    return pricing
