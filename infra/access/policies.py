"""IAM policy documents, as plain dicts: what each principal may do and nothing more."""

from __future__ import annotations

from core.contract.names import AUTOSCALER_DISCOVERY_TAG
from core.contract.s3_uri import parse_s3_uri


def assume_role_policy(service: str, *, tag_session: bool = False) -> dict:
    actions = ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"]
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]}


def pod_identity_trust_policy() -> dict:
    # EKS Pod Identity: the agent assumes the role as pods.eks.amazonaws.com and tags the
    # session (AWS docs, "EKS Pod Identity role trust policy").
    return assume_role_policy("pods.eks.amazonaws.com", tag_session=True)


def trainer_policy(*, results_bucket: str, results_prefix: str, datasets_uri: str) -> dict:
    """Read the datasets prefix; read and write the results prefix; nothing else.

    ``results_prefix`` is the stack's prefix (``<project>/<stack>/``) so that every run of
    the stack can write its own ``<run-id>/`` beneath it.
    """
    ds_bucket, ds_prefix = parse_s3_uri(datasets_uri)
    results_prefix = results_prefix.rstrip("/") + "/"
    # GetObject of a missing key answers 404 NoSuchKey only to a caller allowed s3:ListBucket on the
    # bucket, 403 AccessDenied otherwise (S3 API reference, GetObject: "Permissions"). That check
    # carries no s3:prefix, so a plain StringLike on s3:prefix never matches it, and a missing
    # manifest.json read as AccessDenied. StringLikeIfExists keeps ListObjects scoped (a request
    # naming another prefix is denied) and lets the prefix-less check pass. What it also allows: a
    # listing with no prefix at all, i.e. the key names (not the contents) of the datasets bucket.
    statements = [
        {"Sid": "ListDatasets", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{ds_bucket}",
         "Condition": {"StringLikeIfExists": {"s3:prefix": [f"{ds_prefix}*"]}}},
        {"Sid": "ReadDatasets", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": f"arn:aws:s3:::{ds_bucket}/{ds_prefix}*"},
        {"Sid": "ListResults", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{results_bucket}",
         "Condition": {"StringLike": {"s3:prefix": [f"{results_prefix}*"]}}},
        {"Sid": "WriteResults", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": f"arn:aws:s3:::{results_bucket}/{results_prefix}*"},
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def nodegroups_arn(cluster_arn: str) -> str:
    """Every node group of the cluster whose ARN is ``cluster_arn``: a node group's ARN is
    ``arn:<partition>:eks:<region>:<account>:nodegroup/<cluster>/<nodegroup>/<uuid>`` (Service
    Authorization Reference, "Actions, resources, and condition keys for Amazon EKS", nodegroup)."""
    head, _, name = cluster_arn.partition(":cluster/")
    if not name:
        raise ValueError(f"{cluster_arn!r}: not an EKS cluster ARN (arn:aws:eks:<region>:<account>:cluster/<name>)")
    return f"{head}:nodegroup/{name}/*"


def autostop_policy(*, cluster_arn: str, bucket: str, key: str) -> dict:
    """The autostop controller: read and resize this cluster's node groups, write its one record."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ResizeNodeGroups", "Effect": "Allow",
         "Action": ["eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"], "Resource": nodegroups_arn(cluster_arn)},
        {"Sid": "WriteRecord", "Effect": "Allow", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{bucket}/{key}"},
    ]}


def cluster_autoscaler_policy(*, cluster_name: str, cluster_arn: str) -> dict:
    """Cluster Autoscaler with ASG auto-discovery: kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/
    README.md, "Full Cluster Autoscaler Features Policy (Recommended)", with its advice taken: the write actions
    only on Auto Scaling groups of this cluster that opted in (tagged ``AUTOSCALER_DISCOVERY_TAG/<cluster>: owned``
    by ``infra.cluster.node_group``; not EKS's ``k8s.io/cluster-autoscaler/<cluster>``, which every managed node
    group carries; AWS Auto Scaling user guide, "Control access using tags"), and eks:DescribeNodegroup on this
    cluster's node groups. The describe actions take no resource."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Discover", "Effect": "Allow", "Resource": "*",
         "Action": ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
                    "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements"]},
        {"Sid": "ReadNodeGroups", "Effect": "Allow", "Action": "eks:DescribeNodegroup",
         "Resource": nodegroups_arn(cluster_arn)},
        {"Sid": "ScaleThisClustersGroups", "Effect": "Allow", "Resource": "*",
         "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
         "Condition": {"StringEquals": {f"aws:ResourceTag/{AUTOSCALER_DISCOVERY_TAG}/{cluster_name}": "owned"}}},
    ]}


def tls_only_bucket_policy(bucket_arn: str) -> dict:
    """Deny every request that does not use TLS (AWS S3 security best practices)."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}


NODE_ROLE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    # Session Manager instead of SSH keys for debugging nodes.
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
