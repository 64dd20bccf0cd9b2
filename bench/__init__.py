"""eksbench's command line (``eksbench``, or ``python3 -m bench``) and its Python API (``bench.automation``,
``bench.results``)."""

__version__ = "0.1.0"
