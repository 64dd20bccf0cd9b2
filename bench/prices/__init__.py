"""The catalog's price snapshot (``core/catalog/aws_prices.py``): read from where AWS's prices are published, and
written as the module every cost figure of eksbench is priced from.

``sources`` reads the three files a snapshot can be built from (the AWS Price List bulk offer file of a region,
SkyPilot's ``vms.csv``, and the table kept in ``core/catalog/sources/``); ``pricing_api`` asks the AWS Price List
Query API (``pricing.get_products``); ``snapshot`` writes the module. ``eksbench prices`` is the command line.
"""
