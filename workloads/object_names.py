"""The Kubernetes names of one run of an experiment: its Jobs, Service, gate and pods' host names.

Every name is a DNS-1035 label (``core.contract.k8s_names.dns1035_label``), short enough for the pod host name
``<job>-<index>`` and the Job-name label. Pure functions (no Pulumi, no I/O).
"""

from __future__ import annotations

from core.config.model import Experiment
from core.contract.k8s_names import dns1035_label

# A Job name becomes the pod hostname "<job>-<index>" and the label value
# batch.kubernetes.io/job-name: both are limited to 63 characters (RFC 1123 label).
# 40 leaves room for the "-eval-gate" suffix and "-<index>". The Service has the same name (so the
# same limit): it is the pods' subdomain, one label of "<job>-<index>.<svc>.<namespace>.svc.cluster.local".
MAX_BASE_NAME = 40
# What each object of an experiment's run adds to its base name (workloads.job_manifests builds them;
# tests/workloads/test_k8s_names.py checks that they agree with ``object_names``).
NAME_SUFFIXES = {"pserver": "ps", "eval": "eval", "gate": "gate", "eval-gate": "eval-gate"}


def base_name(experiment: Experiment, run_id: str) -> str:
    """``<experiment>-<run_id>`` (``-r<k>`` added for repeat k): the training Job, its pods' peers label and
    the rendezvous id. A DNS-1035 label of at most MAX_BASE_NAME characters (``core.contract.k8s_names``): a name
    that is too long, or starts with a digit, is made valid and ends with a stable hash of its parts."""
    parts = (experiment.name, run_id) + ((f"r{experiment.repeat}",) if experiment.repeat else ())
    return dns1035_label(*parts, limit=MAX_BASE_NAME)


def service_name(experiment: Experiment, run_id: str) -> str:
    """The headless Service: the Job's own name, already a DNS-1035 label (which a Service name must be)."""
    return base_name(experiment, run_id)


def derived_name(job: str, role: str) -> str:
    """The name of one of a run's other objects: ``<job>-<suffix>`` (NAME_SUFFIXES), a DNS-1035 label."""
    return dns1035_label(job, NAME_SUFFIXES[role])


def object_names(experiment: Experiment, run_id: str) -> dict[str, str]:
    """Every Kubernetes object name one run of ``experiment`` may create, by role (as
    ``job_manifests.experiment_manifests`` keys them; the gate's ServiceAccount, Role and RoleBinding share
    the "gate" name). The gate is named whether or not the run gets one (it does when it waits for the
    previous experiment), so a check of these never depends on the order the experiments run in."""
    job = base_name(experiment, run_id)
    out = {"svc": service_name(experiment, run_id), "job": job}
    if experiment.framework == "paddle":
        out["pserver"] = paddle_job_names(job)[1]
    if experiment.evaluate:
        out["eval"] = derived_name(job, "eval")
        out["eval-gate"] = derived_name(job, "eval-gate")
    out["gate"] = derived_name(job, "gate")
    return out


def pod_host(job: str, index: int | str, service: str) -> str:
    """Indexed Job pods are named <job>-<index>; with subdomain=<svc> they resolve as <job>-<index>.<svc>."""
    return f"{job}-{index}.{service}"


# The kubelet's clusterDomain on EKS nodes (awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go,
# defaultKubeletSubConfig: ClusterDomain "cluster.local"); infra.environment's etcd endpoint uses it too.
CLUSTER_DOMAIN = "cluster.local"


def pod_fqdn(job: str, index: int | str, service: str, namespace: str) -> str:
    """``<job>-<index>.<svc>.<ns>.svc.cluster.local``: the name the kubelet writes into the pod's own
    /etc/hosts, first on its IP's line, when the pod has a subdomain (kubernetes/kubernetes
    pkg/kubelet/kubelet_pods.go ``managedHostsFileContent``: "<ip>\t<hostname>.<hostDomainName>\t<hostname>",
    hostDomainName = "<subdomain>.<namespace>.svc.<clusterDomain>"). So the pod resolves it
    without DNS, as the canonical name of its own hostname."""
    return f"{pod_host(job, index, service)}.{namespace}.svc.{CLUSTER_DOMAIN}"


def paddle_job_names(job: str) -> tuple[str, str]:
    """(trainer Job, pserver Job): two Indexed Jobs, so pservers hold no GPUs."""
    return job, derived_name(job, "pserver")
