"""The home stack (``eksbench:role: home``): what outlives every experiment stack.

One bucket holds every run's results under ``<project>/<stack>/<run-id>/<experiment>/`` and the
prepared datasets under ``datasets/<name>/``; an ECR repository holds images built from
``workloads/Dockerfile``. Both are protected and retained. Experiment stacks read the bucket
through a StackReference (``results.home_stack``), or use an existing bucket (``results.bucket``):
they never create or delete it, so ``pulumi destroy`` of an experiment cannot touch results,
and datasets can be prepared (``bench data prepare NAME --to <datasets_uri>NAME/``) before the
first experiment ``up``.
"""

from __future__ import annotations

from typing import Any, Mapping

import pulumi

from core.config.model import HomeConfig, StackConfig
from core.config.shape import parse_home_config
from core.contract.results_location import (
    DATASETS_PREFIX,
    ResultsLocation,
    datasets_uri,
    home_bucket,
    results_bucket,
)
from infra.storage.image_repository import ImageRepository, ImageRepositoryArgs
from infra.storage.results_bucket import ResultsBucket, ResultsBucketArgs

__all__ = ["DATASETS_PREFIX", "HOME_OUTPUTS", "build_home", "home_bucket", "home_exports", "results_bucket_name"]
# What the home stack exports, and so what an experiment stack and bench may read from it.
HOME_OUTPUTS = ("bucket", "datasets_uri", "results_uri", "ecr_repository_url", "region")


def home_exports(bucket: str, repository_url: str, *, project: str, region: str) -> dict[str, str]:
    """The home stack's outputs from its bucket name and repository URL (also the mock engine's answer)."""
    return {"bucket": bucket, "datasets_uri": datasets_uri(bucket),
            "results_uri": ResultsLocation(bucket, project).uri, "ecr_repository_url": repository_url, "region": region}


def build_home(raw: Mapping[str, Any], *, project: str, stack: str,
               region: str | None) -> tuple[HomeConfig, dict[str, Any]]:
    """Validate a home stack's config and register its bucket and repository; return the config and outputs."""
    cfg = parse_home_config(raw, project=project, stack=stack, region=region)
    tags = {"eksbench:project": cfg.project, "eksbench:stack": cfg.stack, "eksbench:role": "home", **cfg.tags}
    bucket = ResultsBucket("home", ResultsBucketArgs(stack=cfg.stack, tags=tags))
    repo = ImageRepository("image", ImageRepositoryArgs(project=cfg.project, stack=cfg.stack, tags=tags))
    exports = pulumi.Output.all(bucket.bucket_name, repo.repository_url).apply(
        lambda v: home_exports(v[0], v[1], project=cfg.project, region=cfg.region))
    return cfg, {key: exports.apply(lambda e, k=key: e[k]) for key in HOME_OUTPUTS}


def results_bucket_name(cfg: StackConfig) -> pulumi.Output[str]:
    """An experiment stack's results bucket: the home stack's (read, never created) or the existing one named."""
    name = cfg.results.home_stack
    if not name:
        return pulumi.Output.from_input(results_bucket(cfg.results, None, region=cfg.region))
    home = pulumi.StackReference("home", stack_name=name)
    return pulumi.Output.all(home.get_output("bucket"), home.get_output("region")).apply(
        lambda found: results_bucket(cfg.results, {"bucket": found[0], "region": found[1]}, region=cfg.region))
