"""The Pulumi component that stages every dataset the experiments use onto shared storage.

One staging Job per dataset in ``DatasetStagingArgs.datasets`` (``datasets_to_stage`` picks
them from the experiments: none for ``synthetic``, which the training script generates in
memory), plus the ConfigMap carrying the staging program (``STAGE_FILES``, read from this
checkout). The manifests come from ``datasets.staging_manifests``; this file only reads the
program's files and registers the manifests. Pulumi awaits each Job (no skipAwait) with
customTimeouts sized to the dataset, so training Jobs given ``depends_on=staging`` start only
once the data is in place and checked. The Kubernetes provider and what the component waits
for come in through ``opts``; children get theirs from ``infra.component_options``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from core.catalog.pins import STAGING_IMAGE
from core.config.model import Experiment
from datasets import staging_manifests as manifests
from datasets.catalog import dataset
from infra import k8s_objects
from infra.component_options import child_options
from infra.environment import Environment

REPO_ROOT = Path(__file__).resolve().parent.parent


def datasets_to_stage(experiments: Sequence[Experiment]) -> tuple[str, ...]:
    """The distinct datasets the experiments train on that need staging, in first-use order."""
    names: list[str] = []
    for e in experiments:
        if dataset(e.dataset).needs_staging and e.dataset not in names:
            names.append(e.dataset)
    return tuple(names)


def stage_program_files(root: Path = REPO_ROOT) -> dict[str, str]:
    """The staging program's files (``manifests.STAGE_FILES``): repository path -> text."""
    return {path: (root / path).read_text() for path in manifests.STAGE_FILES}


@dataclass(frozen=True)
class DatasetStagingArgs:
    """What ``DatasetStaging`` stages, from where, onto what.

    datasets: the catalog names to stage, in first-use order (``datasets_to_stage(config.experiments)``).
    storage_kind: "efs" (the Job copies and checks) or "fsx" (the Job waits for the lazy import).
    preload: FSx only (ignored on EFS): also restore and read every file before training.
    region: the AWS region the Jobs' S3 client talks to.
    env: the namespace, service account, claim and datasets_dir the Jobs use.
    source_uri: the datasets prefix, ending in "/" (``s3://bucket/datasets/``); dataset
        ``name`` is staged from ``<source_uri><name>/``.
    image: the staging container image (pinned in ``core.catalog.pins``).
    """
    datasets: tuple[str, ...]
    storage_kind: str
    preload: bool
    region: str
    env: Environment
    source_uri: pulumi.Input[str]
    image: str = STAGING_IMAGE


class DatasetStaging(pulumi.ComponentResource):
    jobs: list[k8s.batch.v1.Job]
    script: k8s.core.v1.ConfigMap | None  # the staging program's ConfigMap

    def __init__(self, name: str, args: DatasetStagingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:datasets:DatasetStaging", name, None, opts)
        env = args.env
        self.jobs, self.script = [], None
        if args.datasets:
            program = manifests.staging_program_config_map_manifest(stage_program_files(), env=env)
            self.script = k8s_objects.register(f"{name}-script", program, child_options(self, opts))
            mode = manifests.staging_mode(args.storage_kind)
            preload = args.preload and mode == "fsx"
            for ds_name in args.datasets:
                ds = dataset(ds_name)
                minutes = manifests.staging_timeout_minutes(ds, mode=mode, preload=preload)
                job = pulumi.Output.from_input(args.source_uri).apply(
                    lambda uri, ds=ds, minutes=minutes: manifests.staging_job_manifest(
                        ds, env=env, program=program, source_uri=f"{uri}{ds.name}/", region=args.region,
                        storage_kind=args.storage_kind, preload=preload, image=args.image,
                        timeout_minutes=minutes))
                self.jobs.append(k8s_objects.register(
                    f"{name}-{ds_name}", job, kind="Job", metadata=manifests.staging_job_metadata(ds, env=env),
                    opts=child_options(
                        self, opts, depends_on=[self.script],
                        # pulumi-kubernetes waits for a Job to complete, 10 minutes by default
                        custom_timeouts=pulumi.CustomTimeouts(create=f"{minutes}m", update=f"{minutes}m"))))
        self.job_names = [manifests.staging_job_name(dataset(n)) for n in args.datasets]
        self.register_outputs({"job_names": self.job_names})
