"""Kubernetes manifests that stage a prepared dataset onto the cluster's shared volume.

Pure builders (no Pulumi, no I/O): a ConfigMap carrying the staging program
(``datasets/stage.py`` and the project modules it imports, ``STAGE_FILES``, under their
repository paths, the way the training code is shipped) and one Job per dataset, which
runs ``python -m datasets.stage``. The Job runs on the CPU system node group as the
trainer service account (EKS Pod Identity grants it S3 read; no keys), and finishes only
when ``<datasets_dir>/<name>/`` matches the dataset's manifest:

  EFS  copy from ``<datasets_uri>/<name>/`` and check every file's sha256;
  FSx  the data repository association imports lazily, so the Job waits until every
       file is visible with its size; with ``storage.preload`` it also restores and
       reads every file, so the first epoch does not measure S3 latency.

Pulumi awaits these Jobs (no skipAwait), with timeouts sized by ``staging_timeout_minutes``,
so training Jobs that depend on them start only on a staged dataset.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
from collections.abc import Mapping

from core.catalog.pins import PIP_PINS, STAGING_IMAGE
from datasets.catalog import Dataset
from infra.access.pod_security import harden_pod_spec
from infra.environment import SYSTEM_NODE_LABEL, Environment
from infra.labels import labels, metadata

CODE_ROOT = "/opt/eksbench"  # the pod's PYTHONPATH: the shipped files sit below it at their repository paths
STAGE_MODULE = "datasets.stage"
# The staging program and every project module it imports, as repository paths
# (tests/datasets/test_staging.py parses the imports to keep this list complete).
STAGE_FILES = ("datasets/__init__.py", "datasets/file_checks.py", "datasets/stage.py",
               "core/__init__.py", "core/contract/__init__.py", "core/contract/s3_uri.py")
STAGE_CONFIG_MAP = "eksbench-dataset-stage"
# Rates for sizing timeouts, deliberately pessimistic: one pod writing many small files to
# EFS is bound by per-file latency more than by throughput.
COPY_BYTES_PER_S = 50e6
COPY_FILES_PER_S = 500
READ_BYTES_PER_S = 100e6  # the read-back check, and FSx preload
STAT_FILES_PER_S = 2000
MIN_TIMEOUT_MINUTES = 30
# An installer that installs boto3 only when the image lacks it, then hands over to the program.
ENTRYPOINT = (f'python -c "import boto3" 2>/dev/null || pip install --no-cache-dir --quiet --root-user-action=ignore '
              f'{PIP_PINS["boto3"]} && exec python -m {STAGE_MODULE} "$@"')


def staging_mode(storage_kind: str) -> str:
    if storage_kind not in ("efs", "fsx"):
        raise ValueError(f"storage kind {storage_kind!r}: must be efs or fsx")
    return "copy" if storage_kind == "efs" else "fsx"


def staging_timeout_minutes(ds: Dataset, *, mode: str, preload: bool = False) -> int:
    """How long staging ``ds`` may take: the Job's deadline and Pulumi's customTimeouts."""
    size, files = ds.approx_bytes, ds.approx_files
    if mode == "copy":
        seconds = size / COPY_BYTES_PER_S + files / COPY_FILES_PER_S + size / READ_BYTES_PER_S
    else:
        seconds = files / STAT_FILES_PER_S + (size / READ_BYTES_PER_S if preload else 0)
    return max(MIN_TIMEOUT_MINUTES, 10 + math.ceil(seconds / 60))


def staging_job_name(ds: Dataset) -> str:
    return f"stage-{ds.name}"[:63]


def staging_labels(ds: Dataset) -> dict[str, str]:
    return labels(component="dataset-staging", extra={"eksbench.io/dataset": ds.name})


def staging_dest(ds: Dataset, *, env: Environment) -> tuple[str, str]:
    """(where the staging pod writes ``ds``, the claim's subPath mounted there): ``<datasets_dir>/<name>``
    and the same folder relative to the claim's root, e.g. ("/data/datasets/cifar10", "datasets/cifar10")."""
    dest = f"{env.datasets_dir.rstrip('/')}/{ds.name}"
    sub_path = posixpath.relpath(dest, env.mount_path)
    if sub_path.startswith("..") or posixpath.isabs(sub_path) or "/" not in sub_path:
        raise ValueError(f"datasets_dir {env.datasets_dir!r} is not a folder under the mount path {env.mount_path!r}")
    return dest, sub_path


def staging_job_metadata(ds: Dataset, *, env: Environment) -> dict:
    return {"name": staging_job_name(ds), "namespace": env.namespace, "labels": staging_labels(ds)}


def staging_program_config_map_manifest(files: Mapping[str, str], *, env: Environment) -> dict:
    """The ConfigMap shipping ``files`` (repository path -> text, e.g. ``STAGE_FILES``) to the staging pod.

    ConfigMap keys may not contain "/" ([-._a-zA-Z0-9]+), so "/" is written as "--"; the Job's
    volume ``items`` map each key back to its path under ``CODE_ROOT``.
    """
    bad = [p for p in files if "--" in p or p.startswith("/") or ".." in p.split("/")]
    if bad:
        raise ValueError(f"staging program file {bad[0]!r}: must be a relative path without '--' or '..'")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(STAGE_CONFIG_MAP, env.namespace, label_set=labels(component="dataset-staging")),
            "data": {path.replace("/", "--"): text for path, text in sorted(files.items())}}


def program_digest(program: dict) -> str:
    """The sha256 of every file the staging ConfigMap ships (paths and contents)."""
    return hashlib.sha256(json.dumps(program["data"], sort_keys=True).encode()).hexdigest()


def staging_job_manifest(ds: Dataset, *, env: Environment, program: dict, source_uri: str, region: str,
                         storage_kind: str = "efs", preload: bool = False, image: str = STAGING_IMAGE,
                         timeout_minutes: int | None = None) -> dict:
    """The Job that makes ``<env.datasets_dir>/<ds.name>/`` a checked copy of ``source_uri``.

    The pod mounts only that folder of the shared claim (``subPath``, ``staging_dest``), so a
    staging program misled by a manifest could not reach results or another dataset.

    ``program`` is the staging ConfigMap (``staging_program_config_map_manifest``). The sha256
    of every file it ships goes into the pod template, so a change to any of them replaces
    the Job and staging reruns with it.
    """
    mode = _checked_mode(ds, source_uri=source_uri, storage_kind=storage_kind, preload=preload)
    minutes = timeout_minutes or staging_timeout_minutes(ds, mode=mode, preload=preload)
    dest, sub_path = staging_dest(ds, env=env)
    args = _stage_args(source_uri, dest=dest, mode=mode, minutes=minutes, preload=preload)
    container = _stage_container(image, args=args, region=region, dest=dest, sub_path=sub_path)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": staging_job_metadata(ds, env=env),
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": minutes * 60,
            "template": {
                "metadata": {"labels": staging_labels(ds),
                             "annotations": {"eksbench.io/stage-program-sha256": program_digest(program),
                                             "eksbench.io/source": source_uri}},
                "spec": _stage_pod_spec(container, env=env, program=program, mode=mode),
            },
        },
    }


def _checked_mode(ds: Dataset, *, source_uri: str, storage_kind: str, preload: bool) -> str:
    """The staging mode for ``storage_kind``, once the dataset, its source and ``preload`` are known to fit it;
    ValueError names what does not."""
    if not ds.needs_staging:
        raise ValueError(f"dataset {ds.name!r} is generated in memory by the training script; nothing to stage")
    if not source_uri.startswith("s3://") or not source_uri.endswith("/"):
        raise ValueError(f"source_uri {source_uri!r}: must be an S3 prefix ending in '/', "
                         f"e.g. s3://my-bucket/datasets/{ds.name}/")
    mode = staging_mode(storage_kind)
    if preload and mode != "fsx":
        raise ValueError(f"preload=True applies to FSx only (storage kind is {storage_kind!r})")
    return mode


def _stage_args(source_uri: str, *, dest: str, mode: str, minutes: int, preload: bool) -> list[str]:
    """The staging program's command line (``python -m datasets.stage``): on FSx it waits for the import until
    5 minutes before the Job's deadline (at least a minute)."""
    args = ["--source", source_uri, "--dest", dest, "--mode", mode]
    if mode == "fsx":
        args += ["--wait-seconds", str(max(60, (minutes - 5) * 60))]
    if preload:
        args.append("--preload")
    return args


def _stage_container(image: str, *, args: list[str], region: str, dest: str, sub_path: str) -> dict:
    """The staging container: the installer then the program, the region for boto3, and two mounts: the
    dataset's folder of the shared claim and the shipped code."""
    return {
        "name": "stage",
        "image": image,
        "command": ["/bin/sh", "-c", ENTRYPOINT, "stage"],  # "stage" is $0; the args are "$@"
        "args": args,
        "env": [{"name": "AWS_REGION", "value": region}, {"name": "AWS_DEFAULT_REGION", "value": region},
                {"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "PYTHONPATH", "value": CODE_ROOT}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # Only the dataset's own folder of the shared claim: the pod cannot reach results or other datasets.
        "volumeMounts": [{"name": "shared", "mountPath": dest, "subPath": sub_path},
                         {"name": "code", "mountPath": CODE_ROOT, "readOnly": True}],
    }


def _stage_pod_spec(container: dict, *, env: Environment, program: dict, mode: str) -> dict:
    """The pod: once, on a system node that reaches the claim, as the trainer service account, with the shared
    claim and the staging ConfigMap's files at their repository paths."""
    items = [{"key": key, "path": key.replace("--", "/")} for key in sorted(program["data"])]
    # Non-root, no capabilities, read-only root (infra/access/pod_security.py); no API token.
    return harden_pod_spec({
        "restartPolicy": "Never",
        "serviceAccountName": env.service_account,
        "nodeSelector": {**SYSTEM_NODE_LABEL, **env.claim_node_selector},
        "containers": [container],
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": env.claim_name}},
                    {"name": "code", "configMap": {"name": program["metadata"]["name"], "items": items}}],
    }, automount_token=False, fs_group=mode != "fsx")  # fsGroup could re-own all of FSx
