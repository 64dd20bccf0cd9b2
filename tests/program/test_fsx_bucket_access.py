"""Can FSx's data repository associations read and write the home bucket (SSE-KMS, TLS-only policy)?

FSx for Lustre guide, "Working with server-side encrypted Amazon S3 buckets": SSE-S3 works by default;
SSE-KMS with a customer managed key needs a key policy statement for the FSx service-linked role
(AWSServiceRoleForFSxS3Access_<fs-id>). The home bucket uses the AWS managed key aws/s3, whose fixed
key policy already allows every principal of the account through S3, so nothing is to be added: these
tests keep it that way, and keep the bucket policy to a TLS-only deny that an AWS service calling S3
over HTTPS passes.
"""

import json

import pytest

from program.offline import evaluate


@pytest.fixture(scope="module")
def home():
    return evaluate("home")


def of_type(plan, typ):
    return [r for r in plan.resources if r["type"] == typ]


def test_home_bucket_uses_the_aws_managed_s3_key_so_fsx_needs_no_key_policy(home):
    (sse,) = of_type(home, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    (rule,) = sse["inputs"]["rules"]
    default = rule["applyServerSideEncryptionByDefault"]
    # No kmsMasterKeyId: S3 uses aws/s3. A customer managed key here would need the FSx statement in
    # its key policy (and a kms.Key of this stack to carry it), or every FSx import fails "S3AccessDenied".
    assert default == {"sseAlgorithm": "aws:kms"}, default
    assert rule["bucketKeyEnabled"] is True
    assert not [r for r in home.resources if r["type"].startswith("aws:kms/")]


def test_home_bucket_policy_denies_only_requests_without_tls(home):
    (policy,) = of_type(home, "aws:s3/bucketPolicy:BucketPolicy")
    statements = json.loads(policy["inputs"]["policy"])["Statement"]
    assert [s["Effect"] for s in statements] == ["Deny"]
    assert statements[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}

