"""``python -m workloads.train.pytorch``: one rank of a training job (see the package docstring).

``record`` writes a failing rank's exception to torchrun's error file, so the agent's failure
summary (and the launcher's log and summary.json) names the root cause, not just an exit code.
"""

import time

STARTED = time.time()  # before torch is imported: the start-up record counts the imports

from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402

from workloads.train.pytorch.trainer import main  # noqa: E402

raise SystemExit(record(main)(process_started=STARTED))
