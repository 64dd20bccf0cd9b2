"""Kubernetes manifests for one experiment, as plain dicts: the single source of truth.

Pure builders (no Pulumi, no I/O): the training Indexed Job and its headless Service, the paddle pserver Job,
the evaluation Job, and the gates that order them (``gate_manifests``), around the pod ``pod_manifests``
builds. ``training_job_component`` registers exactly these dicts; tests validate them against the pinned
Kubernetes schema.
"""

from __future__ import annotations

import copy

from core.catalog.fabric import FABRIC_EXIT_CODE
from core.config.autostop import EVAL_TIMEOUT_MINUTES, experiment_budget_minutes
from core.config.model import Experiment, GpuNodeGroup
from core.contract import summary_fields as F
from core.contract.names import (
    ENV_POD_IP,
    EVAL_DIR,
    EXPERIMENT_LABEL,
    PEERS_LABEL,
    REPEAT_LABEL,
    RUN_ID_LABEL,
    SUMMARY_FILE,
)
from infra.environment import Environment
from infra.labels import SKIP_AWAIT, labels, metadata
from workloads.gate_manifests import fingerprint, gate_job_manifest, gate_rbac_manifests, gate_spec
from workloads.launch.by_framework import launch_for
from workloads.launch.common import evaluation_argv
from workloads.launch.pod_script import launcher_script
from workloads.launch.pytorch import C10D_PORT
from workloads.object_names import base_name, paddle_job_names, service_name
from workloads.pod_manifests import one_pod_per_node, pod_ip_env, pod_spec

# Evictions, preemption and node drains are not the workload's fault: they do not count against
# backoffLimit (Job podFailurePolicy; needs restartPolicy Never).
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                  "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


# A node whose pods Cluster Autoscaler may not evict is never scaled down under them: a training or
# evaluation pod restarted elsewhere would lose its run (kubernetes/autoscaler cluster-autoscaler/FAQ.md,
# "What types of pods can prevent CA from removing a node?": cluster-autoscaler.kubernetes.io/safe-to-evict).
NOT_EVICTABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def training_failure_policy() -> dict:
    """IGNORE_DISRUPTIONS, and fail the Job at once when the launcher says ``fabric: strict`` failed
    (core.catalog.fabric.FABRIC_EXIT_CODE): a retry would land on the same fabric; that training diverged
    (summary_fields.DIVERGED_EXIT_CODE): a retry would resume into the same divergence; or that the trainer recorded
    no step (summary_fields.NO_STEPS_EXIT_CODE): a retry would record none either. Kubernetes batch/v1
    PodFailurePolicyOnExitCodesRequirement: containerName, operator In|NotIn, values (exit codes, not 0)."""
    policy = copy.deepcopy(IGNORE_DISRUPTIONS)
    policy["rules"].append({"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                                 "values": [FABRIC_EXIT_CODE, F.DIVERGED_EXIT_CODE,
                                                                            F.NO_STEPS_EXIT_CODE]}})
    return policy


def experiment_labels(e: Experiment, *, run_id: str, instance: str, component: str) -> dict[str, str]:
    repeat = {REPEAT_LABEL: str(e.repeat)} if e.repeat else {}  # one repeat's pods (repeats: N)
    return labels(component=component, instance=instance,
                  extra={EXPERIMENT_LABEL: e.name, RUN_ID_LABEL: run_id, **repeat})


def headless_service_manifest(e: Experiment, *, env: Environment, run_id: str) -> dict:
    """clusterIP None + the pods' subdomain = this name gives each pod the DNS name <job>-<i>.<svc>;
    publishNotReadyAddresses lets peers resolve each other before readiness (there is no probe)."""
    job, svc = base_name(e, run_id), service_name(e, run_id)
    launch = launch_for(e, env, job=job, service=svc, gpus=e.gpus_per_node)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(svc, env.namespace, annotations=SKIP_AWAIT,
                                 label_set=experiment_labels(e, run_id=run_id, instance=job, component="rendezvous")),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {PEERS_LABEL: job},
                     "ports": [{"name": "rendezvous", "port": launch.port or C10D_PORT,
                                "protocol": "TCP"}]}}


def training_job_manifest(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                          code_config_map: dict, region: str | None = None, suspend: bool = False,
                          role: str = "TRAINER", git_commit: str | None = None) -> dict:
    """The Indexed Job that runs the experiment on max_nodes pods, one per node (``one_pod_per_node``).

    completions = parallelism = max_nodes. For an elastic run (min < max) a successPolicy marks the
    Job succeeded once pod 0 (the summary node) succeeded: torchrun starts with >= min nodes, every
    node that took part exits 0 at the end, and pods that never got a node are then terminated by
    the Job controller instead of waiting forever (JobSuccessPolicy, GA in Kubernetes 1.33).
    ``role="PSERVER"`` gives paddle's pserver Job (no GPUs, e.pservers pods).
    """
    job, svc = base_name(e, run_id), service_name(e, run_id)
    pserver = role == "PSERVER"
    name = paddle_job_names(job)[1] if pserver else job
    launch = launch_for(e, env, job=job, service=svc, gpus=e.gpus_per_node, role=role,
                                  instance_type=node_group.instance_type)
    # pservers keep their logs and summary apart: the launcher on index 0 writes summary.json.
    sub = "pserver/" if pserver else ""
    results_dir = env.experiment_results_dir(e) + ("/pserver" if pserver else "")
    # pservers serve until their trainers are done: the trainer Job's summary.json (on the shared claim, written
    # by its index 0 whatever happened) stops them, so a failed trainer Job never leaves them billing.
    script = launcher_script(launch.argv, results_dir=results_dir,
                                       results_uri=env.experiment_results_uri(bucket, e) + sub,
                                       experiment=e.name, prelude=launch.prelude, modules=launch.modules,
                                       pins=launch.pins, launched=launch.launched,
                                       stop_with=f"{env.experiment_results_dir(e)}/{SUMMARY_FILE}" if pserver else None)
    extra_env = [{"name": k, "value": v} for k, v in sorted(launch.env.items())]
    if e.framework == "paddle":  # a pserver's prelude overrides POD_IP with its DNS name (launch.paddle.paddle_env)
        extra_env += [pod_ip_env("POD_IP"), pod_ip_env(ENV_POD_IP)]
    pods = e.pservers if pserver else e.max_nodes
    meta = experiment_labels(e, run_id=run_id, instance=job, component="pserver" if pserver else "training")
    spec = {
        "completionMode": "Indexed",
        "completions": pods, "parallelism": pods,
        "backoffLimit": e.max_restarts if e.framework == "pytorch" else 0,
        "activeDeadlineSeconds": e.timeout_minutes * 60,
        "suspend": suspend,
        "podFailurePolicy": training_failure_policy(),
        "template": {
            "metadata": {"labels": {**meta, PEERS_LABEL: job}, "annotations": dict(NOT_EVICTABLE)},
            "spec": pod_spec(e, env=env, group=node_group, code_config_map=code_config_map, script=script,
                              run_id=run_id, extra_env=extra_env, gpus=0 if pserver else e.gpus_per_node, subdomain=svc,
                              region=region, efa=not pserver, git_commit=git_commit)},
    }
    spec["template"]["spec"]["affinity"] = one_pod_per_node(job, pserver=pserver)
    if e.elastic and not pserver:
        # Done when pod 0 succeeded: it writes and uploads the summary, and it exits 0 only when
        # torchrun finished with >= min_nodes. A rule of succeededCount: min_nodes could be met by
        # the other pods first, and the Job controller then removes the lingering pods, pod 0
        # among them, in the middle of its upload ("lingering pods are removed": batch/v1
        # SuccessPolicy; the leader example of the Kubernetes 1.33 GA post, "Job's SuccessPolicy
        # Goes GA", uses succeededIndexes "0" with succeededCount 1).
        spec["successPolicy"] = {"rules": [{"succeededIndexes": "0", "succeededCount": 1}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(name, env.namespace, label_set=meta, annotations=SKIP_AWAIT), "spec": spec}


def evaluation_job_manifest(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                            code_config_map: dict, region: str | None = None, git_commit: str | None = None) -> dict:
    """One pod on one GPU that evaluates the training checkpoint from shared storage.

    Created suspended; the eval gate resumes it once the training Job is Complete.
    """
    job = f"{base_name(e, run_id)}-eval"
    results_dir = f"{env.experiment_results_dir(e)}/{EVAL_DIR}"
    argv = ("python3",) + evaluation_argv(e.workload, results_dir=env.experiment_results_dir(e),
                                                    data_dir=env.datasets_dir)
    script = launcher_script(argv, results_dir=results_dir,
                                       results_uri=f"{env.experiment_results_uri(bucket, e)}{EVAL_DIR}/",
                                       experiment=f"{e.name}-eval")
    meta = experiment_labels(e, run_id=run_id, instance=base_name(e, run_id), component="evaluation")
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": metadata(job, env.namespace, label_set=meta, annotations=SKIP_AWAIT),
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 1, "suspend": True,
                     "activeDeadlineSeconds": EVAL_TIMEOUT_MINUTES * 60,
                     "podFailurePolicy": copy.deepcopy(IGNORE_DISRUPTIONS),
                     "template": {"metadata": {"labels": dict(meta), "annotations": dict(NOT_EVICTABLE)},
                                  "spec": pod_spec(e, env=env, group=node_group, code_config_map=code_config_map,
                                                    script=script, run_id=run_id, extra_env=[], gpus=1, subdomain=None,
                                                    region=region, efa=False, git_commit=git_commit)}}}


def experiment_manifests(e: Experiment, *, env: Environment, node_group: GpuNodeGroup, bucket: str, run_id: str,
                         code_config_map: dict, region: str | None = None,
                         after: list[tuple[str, str | None]] = (), after_minutes: int = 0,
                         git_commit: str | None = None) -> dict[str, dict]:
    """Every object of one experiment, keyed by role (the Pulumi child is named "<name>-<role>"), in
    creation order: svc, job, [pserver], [eval], [gate-sa, gate-role, gate-binding], [eval-gate], [gate].

    ``after``: gate waits (see gate_spec) that must be done before this experiment starts;
    its Jobs are then created suspended and a gate resumes them. ``after_minutes`` bounds that wait.
    ``git_commit``: the commit of the shipped code (code_files.read_git_commit), given to the
    pods as EKSBENCH_GIT_COMMIT for the summary; computed by the caller, as these builders do no I/O.
    """
    job = base_name(e, run_id)
    common = dict(env=env, node_group=node_group, bucket=bucket, run_id=run_id, code_config_map=code_config_map,
                  region=region, git_commit=git_commit)
    out = {"svc": headless_service_manifest(e, env=env, run_id=run_id),
           "job": training_job_manifest(e, suspend=bool(after), **common)}
    if e.framework == "paddle":
        out["pserver"] = training_job_manifest(e, suspend=bool(after), role="PSERVER", **common)
    if e.evaluate:
        out["eval"] = evaluation_job_manifest(e, **common)
        # A rerun training (replaced Job) must be evaluated again: tie the eval pod template to it.
        out["eval"]["spec"]["template"]["metadata"]["annotations"]["eksbench.io/training"] = fingerprint(out["job"])
    if not (after or e.evaluate):
        return out
    gate_sa = f"{job}-gate"
    resumed = [out[r]["metadata"]["name"] for r in ("job", "pserver") if r in out]
    reach = [n for pair in after for n in pair if n] + resumed + ([f"{job}-eval"] if e.evaluate else [])
    rbac = gate_rbac_manifests(gate_sa, namespace=env.namespace, jobs=reach)
    out.update(zip(("gate-sa", "gate-role", "gate-binding"), rbac))
    meta = experiment_labels(e, run_id=run_id, instance=job, component="gate")
    slack = 60  # minutes for scheduling, node scale-up and image pulls
    if e.evaluate:
        out["eval-gate"] = gate_job_manifest(
            f"{job}-eval-gate", namespace=env.namespace, service_account=gate_sa, label_set=meta,
            code_config_map=code_config_map,
            spec=gate_spec(namespace=env.namespace, wait=[(job, None)], resume=[f"{job}-eval"],
                                     require_success=[job]),
            deadline_seconds=(after_minutes + e.timeout_minutes + slack) * 60, fingerprint=fingerprint(out["eval"]))
    if after:
        out["gate"] = gate_job_manifest(
            f"{job}-gate", namespace=env.namespace, service_account=gate_sa, label_set=meta,
            code_config_map=code_config_map,
            spec=gate_spec(namespace=env.namespace, wait=list(after), resume=resumed),
            deadline_seconds=(after_minutes + slack) * 60,
            fingerprint=fingerprint(*[out[r] for r in ("job", "pserver") if r in out]))
    return out


def suite_budget_minutes(e: Experiment) -> int:
    """How long a successor may have to wait for ``e``: its timeout, its evaluation and start-up slack."""
    return experiment_budget_minutes(e)
