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


def efa_plugin_image(region: str) -> str:
    """AWS publishes the EFA device plugin in the regional EKS ECR (account 602401143452 in
    the commercial regions; AWS docs, "View Amazon container image registries for Amazon EKS add-ons")."""
    return f"602401143452.dkr.ecr.{region}.amazonaws.com/eks/aws-efa-k8s-device-plugin:{EFA_PLUGIN_TAG}"
