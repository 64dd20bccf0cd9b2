"""The home stack's ECR repository, for users who build ``workloads/Dockerfile`` into their own image.

Tags are immutable (a pinned ``image:`` tag always means the same bytes), every push is scanned,
images are encrypted with KMS, and the repository is protected and retained like the bucket.
Nodes pull from it with the node role's AmazonEC2ContainerRegistryReadOnly (same account).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

import pulumi
import pulumi_aws as aws

from infra.component_options import child_options


def repository_name(project: str, stack: str) -> str:
    """``<project>/<stack>/training``, lower case with ECR's allowed separators."""
    clean = lambda s: re.sub(r"[^a-z0-9._-]+", "-", s.lower()).strip("._-") or "x"  # noqa: E731
    return f"{clean(project)}/{clean(stack)}/training"


@dataclass(frozen=True)
class ImageRepositoryArgs:
    project: str
    stack: str
    tags: Mapping[str, str] = field(default_factory=dict)


class ImageRepository(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: ImageRepositoryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:ImageRepository", name, None, opts)
        repo = aws.ecr.Repository(
            f"{name}-repository", name=repository_name(args.project, args.stack),
            image_tag_mutability="IMMUTABLE", image_scanning_configuration={"scan_on_push": True},
            encryption_configurations=[{"encryption_type": "KMS"}], force_delete=False, tags=dict(args.tags),
            opts=child_options(self, opts, retain_on_delete=True, protect=True))
        self.repository_url = repo.repository_url
        self.register_outputs({"repository_url": self.repository_url})
