"""Every pinned image and package version eksbench deploys, in one place.

Images are pinned to a version tag (never ``latest``); Python packages that pods install at
start are pinned to the versions ``requirements-dev.txt`` tests with (a test holds the two
together). Changing a pin here changes it everywhere it is used.
"""

from __future__ import annotations

from core.catalog.aws import DEFAULT_REGION, EKS_VERSIONS

# The training image: an AWS Deep Learning Container (DLC) for PyTorch training on EC2. Unlike the
# stock pytorch/pytorch runtime image it has a C compiler (torch.compile needs one), EFA with
# aws-ofi-nccl (NCCL over EFA instead of TCP sockets) and boto3. The newest tag in this naming
# scheme, from aws/deep-learning-containers docs/src/data/pytorch-training/2.10-gpu-ec2.yml
# (commit e0ecede, 2026-08-21): PyTorch 2.10.0, Python 3.13, CUDA 13.0, Ubuntu 22.04, GA
# 2026-01-21, end of patches 2027-01-21. Pinned by its full version tag: the digest could not be
# verified offline (no registry access here); AWS re-points this tag on patch releases, so pin
# `@sha256:...` in an experiment's `image` for byte-identical reruns. PyTorch 2.11+ DLCs moved to
# a new repository naming (`pytorch:2.13.0-cu133-amzn2023`, Amazon Linux 2023), not adopted here.
DLC_REPOSITORY = "pytorch-training"
DLC_TAG = "2.10.0-gpu-py313-cu130-ubuntu22.04-ec2"
DLC_TORCH_VERSION = "2.10.0"
# The newest DLC for PyTorch training whose torch is built with CUDA 12.6, the last CUDA with Volta
# (sm_70) kernels in PyTorch's builds: the default on V100 groups (p3, p3dn), chosen by core/catalog/compat.py.
# From aws/deep-learning-containers docs/src/data/pytorch-training/2.6-gpu-ec2.yml (same commit):
# PyTorch 2.6.0, Python 3.12, CUDA 12.6, Ubuntu 22.04, GA 2025-01-29, end of patches 2026-01-29 (no
# later pytorch-training DLC is built with CUDA 12.6: 2.7 is cu128, 2.8 cu129, 2.9 and 2.10 cu130).
DLC_TAG_CU126 = "2.6.0-gpu-py312-cu126-ubuntu22.04-ec2"
# The TensorFlow training DLC. aws/deep-learning-containers publishes TensorFlow training images for
# SageMaker only: docs/src/data/tensorflow-training/ lists 2.19 (py312, CUDA 12.5, Ubuntu 22.04, end of
# patches 2026-03-11) and 2.21 (py312, CUDA 12.9, Amazon Linux 2023, GA 2026-07-10, end of patches
# 2027-07-10), CPU and GPU, and no "-ec2" TensorFlow image (commit e0ecede, 2026-08-21). The 2.21 GPU one
# (docker/tensorflow/2.21/Dockerfile.cuda, target "sagemaker") is nvidia/cuda:12.9.1-runtime-amzn2023 with
# EFA 1.49.0, aws-ofi-nccl, PyPI's tensorflow==2.21.0, boto3 and keras>=3.15; its ENTRYPOINT starts
# SageMaker's toolkit only when SageMaker runs it, and the pods' command replaces it anyway.
TF_DLC_REPOSITORY = "tensorflow-training"
TF_DLC_TAG = "2.21.0-gpu-py312-cu129-amzn2023-sagemaker"
DLC_ACCOUNT = "763104351884"  # most commercial regions
# Regions whose DLC registry is another account (aws/deep-learning-containers
# docs/reference/region_availability.md, same commit); China uses amazonaws.com.cn.
DLC_REGION_ACCOUNTS = {
    "af-south-1": "626614931356", "ap-east-1": "871362719292", "ap-east-2": "975050140332",
    "ap-south-2": "772153158452", "ap-southeast-3": "907027046896", "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462", "ap-southeast-6": "633930458069", "ap-southeast-7": "590183813437",
    "ap-northeast-3": "364406365360", "ca-west-1": "204538143572", "eu-south-1": "692866216735",
    "eu-south-2": "503227376785", "eu-central-2": "380420809688", "il-central-1": "780543022126",
    "mx-central-1": "637423239942", "me-south-1": "217643126080", "me-central-1": "914824155844",
    "cn-north-1": "727897471807", "cn-northwest-1": "727897471807",
}


def training_image(region: str, tag: str = DLC_TAG, repository: str = DLC_REPOSITORY) -> str:
    """The DLC training image ``repository:tag`` in ``region``'s ECR (the nodes pull it from their own region)."""
    account = DLC_REGION_ACCOUNTS.get(region, DLC_ACCOUNT)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{repository}:{tag}"


def is_training_image(image: str) -> bool:
    """Whether ``image`` is a pinned DLC, in any region (a default an experiment did not override)."""
    return ".dkr.ecr." in image and any(image.endswith(f"/{DLC_REPOSITORY}:{t}") for t in (DLC_TAG, DLC_TAG_CU126))


# Paddle's training image. AWS builds no Paddle DLC (aws/deep-learning-containers at e0ecede has no
# paddle image in docs/src/data/ nor anywhere in the repository), so the official PaddlePaddle GPU image,
# from Docker Hub: PaddlePaddle 3.0.0 built with CUDA 11.8 + cuDNN 8.9 (the tag PaddlePaddle's own
# install docs name, "3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6", e.g. PaddleX 3.1 installation/paddlepaddle_install,
# driver >= 450.80.02); its CUDA 11 build has Volta (sm_70) kernels for p3 (core/catalog/compat.py). 3.0.0 matches
# requirements-paddle.txt: the newest 3.x whose PyPI CPU wheel has the parameter-server core.
PADDLE_REPOSITORY = "paddlepaddle/paddle"
PADDLE_TAG = "3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6"
PADDLE_IMAGE = f"{PADDLE_REPOSITORY}:{PADDLE_TAG}"

# Horovod images: no AWS DLC has Horovod since PyTorch 2.0.1 (aws/deep-learning-containers fb9f7cb,
# 2023-07-25), so users build workloads/Dockerfile.horovod on a pinned DLC above and push it to the home
# stack's repository (infra/storage/image_repository.py: ``<project>/<home stack>/training``) under these tags,
# which core/catalog/compat.py knows the CUDA build of. Horovod 0.28.1 is its last release.
HOROVOD_VERSION = "0.28.1"
HOROVOD_REPOSITORY = "training"  # the last part of the home stack's repository name
HOROVOD_TAG = f"horovod-{HOROVOD_VERSION}-pt2.10.0-cu130"  # FROM DLC_TAG
HOROVOD_TAG_CU126 = f"horovod-{HOROVOD_VERSION}-pt2.6.0-cu126"  # FROM DLC_TAG_CU126 (V100 groups)

def horovod_image(account: str, region: str, tag: str = HOROVOD_TAG, repository: str = "eksbench/home/training") -> str:
    """Where workloads/Dockerfile.horovod's image is pushed: the home stack's repository in ``account``."""
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}:{tag}"


# The default where no region is known, and the base of workloads/Dockerfile: us-west-2's copy.
TRAINING_IMAGE = training_image(DEFAULT_REGION)
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

# Python packages installed at container start when the image lacks them (the DLC has boto3
# but not python-etcd): python-etcd for torch's etcd-v2 rendezvous, boto3 for S3.
# pynvml (nvidia-ml-py, PyPI 13.615.71): the launcher's GPU sampler (workloads/train/harness/telemetry.py) reads the
# GPUs through it; the pods do not install it at start (a run without it records its reason instead of samples),
# workloads/Dockerfile bakes it in.
PIP_PINS = {"etcd": "python-etcd==0.4.5", "boto3": "boto3==1.43.11", "pynvml": "nvidia-ml-py==13.615.71",
            # torchao's float8 training, for precision fp8 (workloads/train/pytorch/llama_parallel.py); no DLC has it.
            # 0.18.0: the release on PyPI beside torchtitan 0.3.0 (checked 2026-12-07).
            "torchao": "torchao==0.18.0"}
FLOAT8_MODULE = "torchao"
# NVIDIA DALI, for the input path "dali" (workloads/train/common/dali_input.py); no DLC has it. Its wheels are built
# per CUDA major (nvidia-dali-cuda120 for 12.x, nvidia-dali-cuda130 for 13.x; PyPI, 2.4.0 for both), so the pin
# follows the image's CUDA (core/catalog/compat.py; the pinned DLC's, 13.0, for an image it does not know). DALI's
# support matrix (docs.nvidia.com/deeplearning/dali/user-guide/docs/support_matrix.html): cuda120 runs on SM 5.0 and
# later on x86_64 (V100, p3, included) with driver r525+; cuda130 needs a 580+ driver, as the CUDA 13.0 DLC does.
DALI_MODULE = "nvidia.dali"
DALI_VERSION = "2.4.0"


def dali_pin(cuda: str) -> str:
    """The DALI wheel for an image built with CUDA release ``cuda`` ("12.6", "13.0")."""
    return f"nvidia-dali-cuda{cuda.split('.')[0]}0=={DALI_VERSION}"


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

# Cluster Autoscaler's Helm chart, one pin per Kubernetes minor: Cluster Autoscaler's minor matches the
# cluster's ("Starting from Kubernetes 1.12, versioning scheme was changed to match Kubernetes minor releases
# exactly", kubernetes/autoscaler cluster-autoscaler/README.md "Releases", whose table gives the first chart
# of each minor: 1.32 9.45.0+, 1.33 9.47.0+, 1.34 9.51.0+). Each chart is the last release whose appVersion is
# of that minor (the chart repository's index.yaml, gh-pages be36214; the history of
# cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml, master 55c37cd, 2026-08-22): 9.46.6 (appVersion
# 1.32.0), 9.51.0 (1.33.0), 9.53.0 (1.34.2), 9.59.0 (1.35.0). The image is not the chart's appVersion but the
# newest patch of the minor: tags cluster-autoscaler-1.32.7 (2026-02-13), -1.33.6, -1.34.5 and -1.35.2
# (2026-07-22), their images promoted to registry.k8s.io by kubernetes/k8s.io#9116 (1.32.7) and #9760 (the
# others); no later patch tag nor promotion was found (checked 2026-12-07). Since their .0 (1.34: .2) patches
# 1.32-1.34 fix scale-down ("Fix scale-down eligibility when utilization and threshold are zero", "Skip drain of
# node on cloud-provider during delete") and take AWS's instance list of 2026-01-07 (g7e), which 1.35.0 had;
# 1.35.2 fixes scale-down's simulation (a tainted ghost node in place of the removed one) and ARM64 nodes
# labelled amd64 (git log cluster-autoscaler-1.35.0..cluster-autoscaler-1.35.2). Every pinned chart takes the
# image as `image.tag` (values.yaml `image`; templates/deployment.yaml uses "{{ .Values.image.repository }}:
# {{ .Values.image.tag }}"), so an upgrade of the chart alone never changes Cluster Autoscaler's version.
# 1.36 is not pinned: Cluster Autoscaler has 1.36.0 and 1.36.1 (tags of 2026-07-01 and 2026-07-22, images
# promoted by kubernetes/k8s.io#9676 and #9760), but no chart release has an appVersion of 1.36 (the newest,
# 9.59.0 of 2026-07-21, is 1.35.0; a chart of 1.36, kubernetes/autoscaler#10091, was not merged when read), and
# a 1.36 image in a chart released for 1.35 would run with 1.35's RBAC and flags: the minors must match. A
# minor missing here is refused at plan time for a stack whose GPU groups opt in to autoscaling.
CLUSTER_AUTOSCALER_REPOSITORY = "https://kubernetes.github.io/autoscaler"  # the chart README's `helm repo add`
CLUSTER_AUTOSCALER_CHARTS = {  # Kubernetes minor -> (chart version, Cluster Autoscaler version)
    "1.32": ("9.46.6", "1.32.7"),
    "1.33": ("9.51.0", "1.33.6"),
    "1.34": ("9.53.0", "1.34.5"),
    "1.35": ("9.59.0", "1.35.2"),
}
# A stack that names no kubernetes_version gets the newest EKS version that every per-minor pin here covers, so
# the default never meets "no chart pinned" (today 1.35: Cluster Autoscaler has 1.36 releases, its chart none,
# as read above). A stack file may still choose a newer version.
DEFAULT_EKS_VERSION = max((v for v in EKS_VERSIONS if v in CLUSTER_AUTOSCALER_CHARTS),
                          key=lambda v: tuple(map(int, v.split("."))))
