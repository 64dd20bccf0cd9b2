"""Meaning rules of storage: the shared volume's options (EFS modes, FSx's deployment type) and the place
results and prepared datasets live (the home stack's bucket or an existing one).
``program.validation.meaning_problems`` runs them with the others."""

from __future__ import annotations

from core.config.fields import placeholder_bucket, problem, show
from core.config.model import StackConfig
from core.config.shape import HOME_STACK_EXAMPLE
from core.contract.s3_uri import parse_s3_uri
from datasets.catalog import DATASET_NAMES, dataset


def storage_problems(cfg: StackConfig) -> list[str]:
    """Options that apply to the chosen storage kind only, and EFS modes that go together."""
    out, s = [], cfg.storage
    if s.preload and s.kind != "fsx":
        out.append(problem("storage.preload", True, f'applies to storage.kind "fsx" only (kind is '
                           f'{show(s.kind)}); remove it', "storage.kind: fsx"))
    # EFS: "Elastic throughput is available only for file systems that use the General Purpose
    # performance mode" (Amazon EFS user guide, "Throughput modes").
    if s.kind == "efs" and s.efs.throughput_mode == "elastic" and s.efs.performance_mode == "maxIO":
        out.append(problem("storage.efs.performance_mode", "maxIO",
                           'EFS Elastic throughput requires the General Purpose performance mode; use '
                           '"generalPurpose", or throughput_mode "bursting"', '"generalPurpose"'))
    return out


# FSx links /datasets and /results to S3 through data repository associations, which exist on
# PERSISTENT_2 file systems only (AWS FSx for Lustre user guide, "Linking your file system to an S3
# bucket"; pulumi_aws/fsx/data_repository_association.py: "only compatible with ... PERSISTENT_2
# deployment type"); other types link through the file system's import/export paths, which export
# nothing automatically.
FSX_DRA_DEPLOYMENT_TYPES = ("PERSISTENT_2",)


def fsx_deployment_problems(cfg: StackConfig) -> list[str]:
    """An FSx file system the stack can link to S3 (see FSX_DRA_DEPLOYMENT_TYPES)."""
    f = cfg.storage.fsx
    if cfg.storage.kind != "fsx" or f.deployment_type in FSX_DRA_DEPLOYMENT_TYPES:
        return []
    return [problem("storage.fsx.deployment_type", f.deployment_type,
                    f"cannot have data repository associations, which link /datasets and /results to S3 "
                    f"(FSx for Lustre: PERSISTENT_2 only); allowed: {', '.join(FSX_DRA_DEPLOYMENT_TYPES)}",
                    show(FSX_DRA_DEPLOYMENT_TYPES[0]))]


def results_bucket_problems(cfg: StackConfig, cluster: bool = True) -> list[str]:
    """Results and prepared datasets need a place that outlives this stack and exists before it does.

    That is the home stack (``results.home_stack``: its bucket holds ``<project>/<stack>/...`` results and
    ``datasets/``) or an existing ``results.bucket``; an experiment stack never creates or deletes it.
    ``datasets_uri`` moves the datasets elsewhere but the results still need one of the two. A local run
    (``cluster`` False) needs neither: its results stay on this machine.
    """
    out = []
    needs = [(i, e.dataset) for i, e in enumerate(cfg.experiments)
             if e.dataset in DATASET_NAMES and dataset(e.dataset).needs_staging]
    if cfg.results.home_stack and cfg.results.bucket:
        out.append(problem("results.bucket", cfg.results.bucket, "and results.home_stack are both set; results go "
                           "to one place: keep home_stack (the home stack's bucket) or bucket (an existing one)"))
    elif not cfg.results.home_stack and not cfg.results.bucket and cluster:  # a local run writes here only
        why = (f"{cfg.experiment_key(needs[0][0])} trains on the prepared dataset {needs[0][1]!r}, read from the home "
               f"stack's datasets/ prefix, and results" if needs else "results")
        out.append(f"results.home_stack: is required: {why} go to a bucket this stack never creates or deletes; "
                   f"create the home stack once (pulumi up -s home) and set results.home_stack to its name, e.g. "
                   f"{HOME_STACK_EXAMPLE} (file backend) or \"<your org>/eksbench/home\" (Pulumi Cloud), or set "
                   f"results.bucket to an existing bucket")
    for key, bucket in (("datasets_uri", parse_s3_uri(cfg.datasets_uri)[0] if cfg.datasets_uri else None),
                        ("results.bucket", cfg.results.bucket)):
        if bucket and placeholder_bucket(bucket):
            value = cfg.datasets_uri if key == "datasets_uri" else bucket
            out.append(problem(key, value, "names a placeholder bucket copied from an example; put a bucket you "
                               "own (for datasets_uri, the prefix you prepared datasets under with "
                               "eksbench data prepare)"))
    return out
