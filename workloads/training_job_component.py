"""``TrainingJob``: registers one experiment's Kubernetes objects with Pulumi.

Thin on purpose: ``workloads.job_manifests.experiment_manifests`` builds every object as a
dict, and this component only turns each dict into the matching pulumi-kubernetes
resource (children ``<name>-svc``, ``<name>-job``, ``<name>-eval``, ...). The bucket
name is an Output, so the dicts are built inside ``apply``; which objects exist depends
on the experiment alone, so the resources themselves are created outside it.

Await: every Job and the Service carry ``pulumi.com/skipAwait: "true"``, so ``pulumi up``
returns once the objects exist instead of blocking on the provider's 10-minute Job await
(or for hours with a custom timeout). Progress and results are read from the cluster,
shared storage and S3. Ordering (evaluation after training, sequential experiments) is
done in the cluster by suspended Jobs and gates; see workloads/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pulumi

from core.config.model import Experiment, GpuNodeGroup
from infra import k8s_objects
from infra.component_options import child_options
from infra.environment import Environment
from workloads.job_manifests import experiment_manifests
from workloads.object_names import base_name


@dataclass(frozen=True)
class TrainingJobArgs:
    """Inputs of one experiment's objects.

    experiment, env, node_group, run_id: from the parsed config (node_group: the GpuNodeGroup that
        experiment.node_group names).
    bucket: the results bucket's name.
    code_config_map: the code ConfigMap manifest (manifests.code_config_map_manifest); the pods
        mount it by name, the suite registers it.
    region: exported to the pods as AWS_REGION for boto3.
    after: gate waits (gate_manifests.completion_waits of the previous experiment) to finish before
        this experiment starts; empty = start at once.
    after_minutes: the longest that wait can take (sum of job_manifests.suite_budget_minutes).
    git_commit: the shipped code's commit (code_files.read_git_commit), EKSBENCH_GIT_COMMIT in the pods.
    after_jobs: the resources of the Jobs that ``after`` names (the previous run's ``TrainingJob.completion``):
        the gate is created after them, as it would take a Job it cannot find for one that finished.
    """
    experiment: Experiment
    env: Environment
    node_group: GpuNodeGroup
    bucket: pulumi.Input[str]
    run_id: str
    code_config_map: Mapping[str, Any]
    region: str | None = None
    after: Sequence[tuple[str, str | None]] = ()
    after_minutes: int = 0
    git_commit: str | None = None
    after_jobs: Sequence[pulumi.Resource] = ()


class TrainingJob(pulumi.ComponentResource):
    """One experiment: headless Service, Indexed Job(s), optional evaluation Job and gates."""

    results_uri: pulumi.Output[str]
    job_name: str
    resources: dict[str, pulumi.CustomResource]
    completion: list[pulumi.CustomResource]  # the Jobs whose end is this run's end (gate_manifests.completion_waits)

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:workloads:TrainingJob", name, None, opts)
        e = args.experiment
        if bool(args.after) != bool(args.after_jobs):  # a gate created before the Jobs it waits for takes them as done
            raise ValueError(f"{name}: after and after_jobs come together (the waits and the Jobs they name)")

        def build(bucket: str) -> dict[str, dict]:
            return experiment_manifests(
                e, env=args.env, node_group=args.node_group, bucket=bucket, run_id=args.run_id,
                code_config_map=dict(args.code_config_map), region=args.region, after=list(args.after),
                after_minutes=args.after_minutes, git_commit=args.git_commit)

        bucket = pulumi.Output.from_input(args.bucket)
        shapes = build("bucket")  # which objects exist and their kinds do not depend on the bucket
        built = bucket.apply(build)
        # Children wait for what the component waits for (the code ConfigMap); a gate also for the objects before
        # it, and the run's gate for the previous run's Jobs: one that found a Job missing would take it as done.
        self.resources = {}
        for role, shape in shapes.items():
            job = shape["kind"] == "Job"
            gate = role.endswith("gate")
            waits = list(self.resources.values()) if gate else []
            if role == "gate":
                waits += args.after_jobs
            child = child_options(
                self, opts, depends_on=waits,
                # Names are fixed (pods resolve each other by them), so a replacement must delete first.
                delete_before_replace=job or None,
                # Any Job change reruns it: most of a Job's spec is immutable anyway (the pod template),
                # and an in-place apply would fight the gate over spec.suspend.
                replace_on_changes=["spec"] if job else None,
                # Gates flip spec.suspend in the cluster; that is not drift to undo.
                ignore_changes=["spec.suspend"] if job and shape["spec"].get("suspend") else None)
            self.resources[role] = k8s_objects.register(f"{name}-{role}", built.apply(lambda m, r=role: m[r]), child,
                                                        kind=shape["kind"])
        self.completion = [self.resources[role] for role in ("job", "eval") if role in self.resources]
        self.job_name = base_name(e, args.run_id)
        self.results_uri = bucket.apply(lambda b: args.env.experiment_results_uri(b, e))
        self.register_outputs({"results_uri": self.results_uri, "job_name": self.job_name})
