"""``python -m workloads.train``: one rank of a training job (see the package docstring)."""

from workloads.train.trainer import main

raise SystemExit(main())
