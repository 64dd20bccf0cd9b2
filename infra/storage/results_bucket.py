"""The home stack's bucket: results of every experiment stack, and the prepared datasets.

Only the home stack (``program.home``) creates it; experiment stacks read its name through a
StackReference, or use an existing bucket named in config, and never create or delete one.
It blocks public access, encrypts at rest, enforces TLS, keeps versions, expires noncurrent
versions after a week, and is protected (``pulumi destroy -s home`` refuses) and retained with its
guards: results outlive experiments, and the home stack too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

import pulumi
import pulumi_aws as aws

from infra.access.policies import tls_only_bucket_policy
from infra.component_options import child_options

NONCURRENT_DAYS = 7


@dataclass(frozen=True)
class ResultsBucketArgs:
    """stack: names the bucket (``eksbench-<stack>-...``). tags: on every resource."""
    stack: str
    tags: Mapping[str, str] = field(default_factory=dict)


class ResultsBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]

    def __init__(self, name: str, args: ResultsBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:ResultsBucket", name, None, opts)
        tags = dict(args.tags)
        kept = dict(retain_on_delete=True, protect=True)
        bucket = aws.s3.Bucket(f"{name}-bucket", bucket_prefix=f"eksbench-{args.stack}-"[:37].lower(),
                               force_destroy=False, tags=tags, opts=child_options(self, opts, **kept))
        guards = child_options(self, opts, depends_on=[bucket], **kept)
        aws.s3.BucketPublicAccessBlock(f"{name}-public-access-block", bucket=bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True, opts=guards)
        aws.s3.BucketOwnershipControls(f"{name}-ownership", bucket=bucket.id,
                                       rule={"object_ownership": "BucketOwnerEnforced"}, opts=guards)
        # SSE-KMS with the AWS managed key aws/s3 (no kms_master_key_id), whose fixed key policy lets every
        # principal of the account use it through S3 ("Allow access through S3 for all principals in the
        # account that are authorized to use S3": kms:CallerAccount, kms:ViaService s3.<region>). FSx's
        # data repository associations reach the bucket as the account's service-linked role
        # AWSServiceRoleForFSxS3Access_<fs-id> through S3, so they read and write without a key policy
        # statement or grant; a customer managed key would need the statement of the FSx for Lustre guide,
        # "Working with server-side encrypted Amazon S3 buckets" (tests/program/test_fsx_bucket_access.py).
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse", bucket=bucket.id, opts=guards,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"}, "bucket_key_enabled": True}])
        aws.s3.BucketVersioning(f"{name}-versioning", bucket=bucket.id,
                                versioning_configuration={"status": "Enabled"}, opts=guards)
        # Versioning keeps every overwrite: checkpoints rewritten every few steps and FSx re-exports
        # would pile up. Noncurrent versions expire; the current one stays.
        aws.s3.BucketLifecycleConfiguration(f"{name}-lifecycle", bucket=bucket.id, opts=guards, rules=[{
            "id": "expire-noncurrent-versions", "status": "Enabled", "filter": {},
            "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_DAYS},
            "abort_incomplete_multipart_upload": {"days_after_initiation": NONCURRENT_DAYS}}])
        aws.s3.BucketPolicy(f"{name}-tls-only", bucket=bucket.id,
                            policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn))), opts=guards)
        self.bucket_name = bucket.bucket
        self.register_outputs({"bucket_name": self.bucket_name})
