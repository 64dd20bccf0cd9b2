"""Which UID writes which folder of an experiment's results, for storage without access points.

On FSx for Lustre every folder is plain POSIX, root-owned at first, and the ``volume-owner``
init container (infra/access/pod_security.py) hands each results folder to the UID of the containers
that write it: root for EFA training pods (IPC_LOCK needs root), RUN_AS_USER for the others.
One experiment's pods write three folders, and every pod of the experiment creates and hands
over all of them, in any order, with the same command:

- ``<results>/``          the training pods (logs, metrics, checkpoints/, summary.json)
- ``<results>/pserver/``  paddle's pservers (never EFA)
- ``<results>/eval/``     the evaluation pod (one GPU, never EFA); it reads checkpoints/ (0644)

Pure; the paths must match those ``workloads.job_manifests`` gives each launcher
(tests/workloads/test_results_folders.py reads them back from the launchers' commands).
"""

from __future__ import annotations

from core.config.model import Experiment, GpuNodeGroup
from core.contract.names import EVAL_DIR
from infra.access.pod_security import writer_uid
from infra.environment import Environment

PSERVER_SUBDIR = "pserver"


def results_folder_owners(e: Experiment, *, env: Environment, group: GpuNodeGroup) -> dict[str, int]:
    """{folder: UID that writes it} for every results folder a pod of ``e`` writes."""
    base = env.experiment_results_dir(e)
    owners = {base: writer_uid(efa=group.efa)}  # training pods are EFA pods exactly when the group has EFA
    if e.framework == "paddle":
        owners[f"{base}/{PSERVER_SUBDIR}"] = writer_uid(efa=False)
    if e.evaluate:
        owners[f"{base}/{EVAL_DIR}"] = writer_uid(efa=False)
    return owners
