"""Every pinned image and package version eksbench deploys, in one place.

Images are pinned to a version tag (never ``latest``); Python packages that pods install at
start are pinned to the versions ``requirements-dev.txt`` tests with (a test holds the two
together). Changing a pin here changes it everywhere it is used.
"""

from __future__ import annotations

# The training image: the stock PyTorch runtime image (workloads/Dockerfile builds on it too).
TRAINING_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
# etcd stays on 3.5: torch's etcd rendezvous backends speak the v2 API, which etcd 3.6
# removed (etcd 3.6 release notes; torch/distributed/elastic/rendezvous/etcd_rendezvous.py).
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.17"
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
# aws/eks-charts stable/aws-efa-k8s-device-plugin chart v0.5.11 ships this tag (its appVersion);
# infra/cluster_manifests follows that chart and tests/infra/upstream vendors it. Images from
# v0.5.9 on are deployed privileged with a /opt/aws/neuron mount (chart v0.5.16): bump both together.
EFA_PLUGIN_TAG = "v0.5.6"
# Small CPU-only pods: the gate (stdlib only) and dataset staging (stdlib + boto3).
GATE_IMAGE = "python:3.12.8-slim-bookworm"
STAGING_IMAGE = "python:3.11.11-slim-bookworm"

# Python packages installed at container start when the image lacks them (the stock image
# has neither): python-etcd for torch's etcd-v2 rendezvous, boto3 for S3.
PIP_PINS = {"etcd": "python-etcd==0.4.5", "boto3": "boto3==1.43.11"}


# The registry account AWS publishes EKS add-on images (the EFA device plugin among them) from, per
# region: AWS docs, "View Amazon container image registries for Amazon EKS add-ons" (table checked
# 2026-11-22). Opt-in regions use their own accounts. Only rows read from that table are listed;
# a region not here is rejected by the plan (program.validation) rather than guessed.
EKS_ADDON_REGISTRY_ACCOUNTS = {
    **{r: "602401143452" for r in (
        "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
        "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "eu-west-3",
        "ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2")},
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
}


def efa_plugin_image(region: str) -> str:
    """The EFA device plugin from the region's EKS add-on registry. KeyError for a region whose
    registry account is not in ``EKS_ADDON_REGISTRY_ACCOUNTS`` (the plan rejects such regions first)."""
    account = EKS_ADDON_REGISTRY_ACCOUNTS[region]
    return f"{account}.dkr.ecr.{region}.amazonaws.com/eks/aws-efa-k8s-device-plugin:{EFA_PLUGIN_TAG}"
