"""Names and paths the cluster environment offers to the workloads that run in it.

One pure function, ``environment_for``, derives them from the parsed config, so the
infra components that create these things and the workload components that use them
cannot disagree on a name.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.config.model import Experiment, StackConfig
from core.contract.names import LUSTRE_CLIENT_LABEL, LUSTRE_CLIENT_READY
from core.contract.results_location import ResultsLocation, datasets_uri

ETCD_PORT = 2379
TRAINER_SERVICE_ACCOUNT = "eksbench-trainer"
SHARED_CLAIM = "eksbench-shared"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
SYSTEM_NODE_LABEL = {"eksbench.io/pool": "system"}
GPU_NODE_LABEL_KEY = "eksbench.io/pool"


@dataclass(frozen=True)
class Environment:
    namespace: str
    service_account: str
    claim_name: str
    mount_path: str  # where the shared file system is mounted in every pod
    datasets_dir: str  # <mount>/datasets, one folder per dataset
    results_dir: str  # <mount>/results/<run_id>: metrics, logs and checkpoints of this run
    etcd_endpoint: str  # host:port of the rendezvous etcd
    results: ResultsLocation  # this run's place in the results bucket (no bucket: the program knows it late)
    datasets_prefix_uri: str | None  # s3://... the datasets come from; None: s3://<results bucket>/datasets/
    storage_kind: str = "efs"  # efs: an access point owns the volume for the pods' user; fsx: root-owned

    def experiment_results_dir(self, experiment: Experiment) -> str:
        """The experiment's (or one repeat's: ``Experiment.runs``) folder on the shared file system."""
        return f"{self.results_dir}/{experiment.results_path}"

    @property
    def results_prefix(self) -> str:
        """The run's key prefix in the results bucket: ``<project>/<stack>/<run_id>/``."""
        return self.results.prefix

    def experiment_results_uri(self, bucket: str, experiment: Experiment) -> str:
        return self.results.child(experiment.name).repeat_run(experiment.repeat).in_bucket(bucket).uri

    def datasets_uri(self, bucket: str) -> str:
        return self.datasets_prefix_uri or datasets_uri(bucket)

    @property
    def claim_node_selector(self) -> dict[str, str]:
        """What a pod mounting the shared claim adds to its nodeSelector: on FSx, a node whose Lustre
        client installed and loaded (the label its user data adds: infra.cluster.node_group)."""
        return {LUSTRE_CLIENT_LABEL: LUSTRE_CLIENT_READY} if self.storage_kind == "fsx" else {}


def environment_for(cfg: StackConfig) -> Environment:
    mount = cfg.storage.mount_path.rstrip("/") or "/data"
    uri = cfg.datasets_uri
    if uri and not uri.endswith("/"):
        uri += "/"
    return Environment(
        namespace=cfg.namespace,
        service_account=TRAINER_SERVICE_ACCOUNT,
        claim_name=SHARED_CLAIM,
        mount_path=mount,
        datasets_dir=f"{mount}/datasets",
        results_dir=f"{mount}/results/{cfg.run_id}",
        etcd_endpoint=f"etcd.{cfg.namespace}.svc.cluster.local:{ETCD_PORT}",
        results=ResultsLocation(None, cfg.project, cfg.stack, cfg.run_id),
        datasets_prefix_uri=uri,
        storage_kind=cfg.storage.kind,
    )
