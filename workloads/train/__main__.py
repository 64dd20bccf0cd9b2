"""``python -m workloads.train``: one rank of a training job (see the package docstring).

``record`` writes a failing rank's exception to torchrun's error file, so the agent's failure
summary (and the launcher's log and summary.json) names the root cause, not just an exit code.
"""

from torch.distributed.elastic.multiprocessing.errors import record

from workloads.train.trainer import main

raise SystemExit(record(main)())
