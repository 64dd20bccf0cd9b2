"""The Pulumi component that stages every dataset the experiments use onto shared storage.

One staging Job per distinct catalog dataset named by the stack's experiments (none
for ``synthetic``, which the training script generates in memory), plus the ConfigMap
carrying the staging program (``STAGE_FILES``, read from this checkout). The manifests come from ``datasets.staging_manifests``; this file
only registers them. Pulumi awaits each Job (no skipAwait) with customTimeouts sized
to the dataset, so training Jobs given ``depends_on=staging.jobs`` start only once the
data is in place and checked. The Kubernetes provider comes in through ``opts``.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from datasets import staging_manifests as manifests
from datasets.catalog import dataset
from infra import k8s_objects
from infra.environment import Environment
from spec.config import StackConfig


def datasets_to_stage(config: StackConfig) -> list[str]:
    """The distinct datasets the experiments train on that need staging, in first-use order."""
    names: list[str] = []
    for e in config.experiments:
        if dataset(e.dataset).needs_staging and e.dataset not in names:
            names.append(e.dataset)
    return names


REPO_ROOT = Path(__file__).resolve().parent.parent


def stage_program_files(root: Path = REPO_ROOT) -> dict[str, str]:
    """The staging program's files (``manifests.STAGE_FILES``): repository path -> text."""
    return {path: (root / path).read_text() for path in manifests.STAGE_FILES}


class DatasetStagingArgs:
    def __init__(self, *, config: StackConfig, env: Environment, bucket: pulumi.Input[str],
                 image: str = manifests.STAGING_IMAGE):
        self.config = config  # the parsed stack config: experiments' datasets, storage kind and preload, region
        self.env = env  # namespace, service account, claim and datasets_dir the Jobs use
        self.bucket = bucket  # the bucket of env.datasets_uri(bucket) when datasets_uri is not set
        self.image = image  # the staging container image (pinned)


class DatasetStaging(pulumi.ComponentResource):
    jobs: list[k8s.batch.v1.Job]
    script: k8s.core.v1.ConfigMap | None

    def __init__(self, name: str, args: DatasetStagingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:datasets:DatasetStaging", name, None, opts)
        cfg, env = args.config, args.env
        self.jobs, self.script = [], None
        # the component's own depends_on (e.g. the namespace and the shared claim) also orders its children
        after = opts.depends_on if opts and opts.depends_on else []
        after = list(after) if isinstance(after, (list, tuple)) else [after]
        names = datasets_to_stage(cfg)
        if names:
            program = manifests.staging_program_config_map_manifest(stage_program_files(), env=env)
            self.script = k8s_objects.register(
                f"{name}-script", program,
                pulumi.ResourceOptions(parent=self, depends_on=after))
            mode = manifests.staging_mode(cfg.storage.kind)
            preload = cfg.storage.preload and mode == "fsx"
            for ds_name in names:
                ds = dataset(ds_name)
                minutes = manifests.staging_timeout_minutes(ds, mode=mode, preload=preload)
                job = pulumi.Output.from_input(args.bucket).apply(
                    lambda bucket, ds=ds, minutes=minutes: manifests.staging_job_manifest(
                        ds, env=env, program=program, source_uri=f"{env.datasets_uri(bucket)}{ds.name}/",
                        region=cfg.region, storage_kind=cfg.storage.kind, preload=preload, image=args.image,
                        timeout_minutes=minutes))
                self.jobs.append(k8s_objects.register(
                    f"{name}-{ds_name}", job, kind="Job", metadata=manifests.staging_job_metadata(ds, env=env),
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[*after, self.script],
                        # pulumi-kubernetes waits for a Job to complete, 10 minutes by default
                        custom_timeouts=pulumi.CustomTimeouts(create=f"{minutes}m", update=f"{minutes}m"))))
        self.job_names = [manifests.staging_job_name(dataset(n)) for n in names]
        self.register_outputs({"job_names": self.job_names})

