"""``python -m bench``: the eksbench command line."""

from bench.cli import main

raise SystemExit(main())
