"""Which training image can run on which GPU node group: the compatibility table, as data.

Three tables, each row with its source, and the few pure functions that read them:

- ``IMAGES``: training images eksbench knows the CUDA build of -> the GPU architectures
  (compute capabilities) it has kernels for, and the CUDA release it needs a driver for;
- ``CUDA_DRIVERS``: CUDA release -> the NVIDIA driver it needs *without* the forward-compatibility
  package (``/usr/local/cuda/compat``), since the pods never load that package (see below);
- ``GPU_ARCH``: GPU model (``core.catalog.aws.InstanceType.gpu_model``, so every instance type of
  the catalog) -> compute capability; ``AMI_DRIVERS``: EKS GPU AMI type -> its NVIDIA driver branch.

Why the forward-compatibility package is out of reach. The DLC's ENTRYPOINT
(``dockerd_entrypoint.sh``) runs ``start_cuda_compat.sh``, which puts ``/usr/local/cuda/compat`` on
LD_LIBRARY_PATH only when the node's driver is older than the driver that package carries (for
CUDA 13.0 Update 2, 580.95.05; for 12.6 Update 3, 560.35.05). Our pods' ``command`` replaces the
ENTRYPOINT, so that never happens. Skipping it is therefore safe exactly when the node's driver
branch is at least the branch of the image's CUDA toolkit driver (``CUDA_DRIVERS``), which is what
``driver_problem`` enforces. (Upstream the script runs as a child ``bash``, so even the ENTRYPOINT's
``export`` never reaches the training process: aws/deep-learning-containers
pytorch/training/docker/build_artifacts/dockerd_entrypoint.sh and scripts/docker/pytorch/start_cuda_compat.sh,
commit e0ecede.)

A GPU of compute capability X.y runs SASS built for X.z with z <= y (same major), or PTX built for
any capability <= X.y, which the driver compiles at load (NVIDIA CUDA C++ Programming Guide,
"Binary Compatibility" and "PTX Compatibility"). An image not in ``IMAGES`` (custom, other
frameworks) cannot be checked: ``bench plan`` warns and names this file.

Pure data and functions: no Pulumi, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.catalog import aws as catalog
from core.catalog import pins


@dataclass(frozen=True)
class TrainingImage:
    """One image build. ``tags``: the pinned tag first, then AWS's aliases of the same build line."""
    repository: str
    tags: tuple[str, ...]
    framework: str
    framework_version: str
    cuda: str  # the CUDA release its framework is built with, "13.0"
    sass: tuple[str, ...]  # compute capabilities with compiled kernels (SASS)
    ptx: tuple[str, ...]  # compute capabilities with PTX (JIT-compiled on newer GPUs)
    end_of_patch: str  # ISO date; AWS's "eop"
    source: str
    # MB unpacked: the DLC build's image_size_baseline (docker inspect's Size; the build fails above 1.2x),
    # aws/deep-learning-containers pytorch/training/buildspec-<version>-ec2.yml. No compressed size is published.
    size_mb: int | None = None
    # A stock image anyone pulls by this name (a DLC, Docker Hub's); False for one the user builds and pushes
    # to their own registry (Horovod's), which is known here but never a default.
    stock: bool = True

    @property
    def name(self) -> str:
        return f"{self.framework} {self.framework_version} (CUDA {self.cuda})"


@dataclass(frozen=True)
class CudaDriver:
    toolkit_driver: str  # the driver that ships with the toolkit, and in its cuda-compat package
    minor_compat_major: int  # the lowest driver branch of CUDA minor-version compatibility (limited features)
    source: str

    @property
    def branch(self) -> int:
        return int(self.toolkit_driver.split(".")[0])


@dataclass(frozen=True)
class AmiDriver:
    branch: int  # the NVIDIA driver branch (major version) every current release of the AMI has
    version: str  # the full version in the newest release read
    source: str


# Images in order of preference: the default of a node group is the first row that runs there.
IMAGES: tuple[TrainingImage, ...] = (
    TrainingImage(
        pins.DLC_REPOSITORY,
        (pins.DLC_TAG, "2.10-gpu-py313-cu130-ubuntu22.04-ec2-v1", "2.10.0-gpu-py313-ec2", "2.10-gpu-py313-ec2"),
        "pytorch", "2.10.0", "13.0",
        sass=("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx=("12.0",), end_of_patch="2027-01-21",
        # Tags: aws/deep-learning-containers docs/src/data/pytorch-training/2.10-gpu-ec2.yml (commit e0ecede).
        # torch is PyTorch's own cu130 wheel (pytorch/training/docker/2.10/py3/cu130/Dockerfile.gpu:
        # `pip install torch==2.10.0 --index-url https://download.pytorch.org/whl/cu130`, base image CUDA
        # 13.0.2); its architectures: pytorch/pytorch RELEASE.md, "PyTorch CUDA Support Matrix", CUDA 13.0:
        # Turing 7.5, Ampere 8.0/8.6, Hopper 9.0, Blackwell 10.0/12.0+PTX; no Volta (CUDA 13.0 removed sm_70).
        source="aws/deep-learning-containers 2.10-gpu-ec2.yml + Dockerfile.gpu; pytorch/pytorch RELEASE.md",
        size_mb=28_000),  # buildspec-2-10-ec2.yml BuildEC2GPUPTTrainPy3cu130DockerImage (commit 3ccf24e)
    TrainingImage(
        pins.DLC_REPOSITORY,
        (pins.DLC_TAG_CU126, "2.6-gpu-py312-cu126-ubuntu22.04-ec2-v1", "2.6.0-gpu-py312-ec2", "2.6-gpu-py312-ec2"),
        "pytorch", "2.6.0", "12.6",
        sass=("7.0", "7.5", "8.0", "8.6", "9.0"), ptx=(), end_of_patch="2026-01-29",
        # Tags: docs/src/data/pytorch-training/2.6-gpu-ec2.yml (commit e0ecede), the only pytorch-training
        # DLC built with CUDA 12.6. Its torch is AWS's torch-2.6.0+cu126 build
        # (pytorch/training/docker/2.6/py3/cu126/Dockerfile.gpu at dd3ba46, FROM nvidia/cuda:12.6.3), whose
        # Dockerfile records TORCH_CUDA_ARCH_LIST "5.2;7.0+PTX;7.5;8.0;8.6;9.0"; PyTorch's own 2.6 cu126
        # wheels carry 5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 9.0 (RELEASE.md support matrix). Listed here: what both
        # say (SASS 7.0-9.0; the PTX neither source is sure of is left out, so no GPU is claimed on PTX alone).
        source="aws/deep-learning-containers 2.6-gpu-ec2.yml + Dockerfile.gpu; pytorch/pytorch RELEASE.md",
        size_mb=19_700),  # buildspec-2-6-ec2.yml BuildEC2GPUPTTrainPy3cu126DockerImage (commit 056a90d)
    TrainingImage(
        pins.TF_DLC_REPOSITORY,
        (pins.TF_DLC_TAG, "2.21-gpu-py312-cu129-amzn2023-sagemaker-v1", "2.21.0-gpu-py312-sagemaker",
         "2.21-gpu-py312-sagemaker"),
        "tensorflow", "2.21.0", "12.9",
        sass=("6.0", "7.0", "8.0", "8.9"), ptx=("9.0",), end_of_patch="2027-07-10",
        # Tags: aws/deep-learning-containers docs/src/data/tensorflow-training/2.21-gpu-sagemaker.yml (commit
        # e0ecede). Its TensorFlow is PyPI's tensorflow==2.21.0 (docker/tensorflow/2.21/cuda/pyproject.toml),
        # whose tensorflow/python/platform/build_info.py says cuda_version 12.5.1 and
        # cuda_compute_capabilities sm_60, sm_70, sm_80, sm_89, compute_90 (read from the wheel; TensorFlow's
        # .bazelrc "cuda_clang" config, "the same as the official TensorFlow builds"): Volta keeps its kernels.
        # cuda is the image's CUDA libraries (FROM nvidia/cuda:12.9.1-runtime-amzn2023), which set its driver floor.
        source="aws/deep-learning-containers tensorflow-training 2.21-gpu-sagemaker.yml + Dockerfile.cuda; "
               "the tensorflow 2.21.0 wheel's build_info.py"),
    TrainingImage(
        pins.PADDLE_REPOSITORY, (pins.PADDLE_TAG,), "paddle", "3.0.0", "11.8",
        sass=("6.0", "6.1", "7.0", "7.5", "8.0", "8.6"), ptx=(), end_of_patch="",
        # Paddle's cmake/cuda.cmake (PaddlePaddle/Paddle): for CUDA 11.2+ every release strategy
        # (NEW_RELEASE_ALL, NEW_RELEASE_PYPI, the default) builds paddle_known_gpu_archs11 + "86", and
        # all of them hold 60 61 70 75 80 (the table keeps what every strategy has: no sm_90, no PTX).
        # Paddle's install tables: Volta sm_70 takes the CUDA 10/11 packages. No DLC: core/catalog/pins.py.
        source="PaddlePaddle/Paddle cmake/cuda.cmake; paddlepaddle.org.cn install Tables; Docker Hub tag"),
    # Horovod images the user builds from workloads/Dockerfile.horovod on the two DLCs above (no DLC has
    # Horovod): the base's torch, so the base's architectures; Horovod's own CUDA kernels are built for the
    # same list (HOROVOD_BUILD_CUDA_CC_LIST in the Dockerfile; horovod cmake/build_utils.py get_nvcc_flags).
    TrainingImage(
        pins.HOROVOD_REPOSITORY, (pins.HOROVOD_TAG,), "horovod", f"{pins.HOROVOD_VERSION} on PyTorch 2.10.0", "13.0",
        sass=("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx=("12.0",), end_of_patch="2027-01-21",
        source="workloads/Dockerfile.horovod FROM the PyTorch 2.10.0 DLC row above", stock=False),
    TrainingImage(
        pins.HOROVOD_REPOSITORY, (pins.HOROVOD_TAG_CU126,), "horovod", f"{pins.HOROVOD_VERSION} on PyTorch 2.6.0",
        "12.6", sass=("7.0", "7.5", "8.0", "8.6", "9.0"), ptx=(), end_of_patch="2026-01-29",
        source="workloads/Dockerfile.horovod FROM the PyTorch 2.6.0 DLC row above", stock=False),
)

# The driver each CUDA release needs without the forward-compatibility package. toolkit_driver: NVIDIA CUDA
# Toolkit Release Notes, Table 3 "CUDA Toolkit and Corresponding Driver Versions" (12.6 Update 3 >= 560.35.05;
# 13.0 Update 2 >= 580.95.05: the releases in the images above). minor_compat_major: NVIDIA "CUDA
# Compatibility", Minor Version Compatibility, Table 1 (12.x >= 525, 13.x >= 580), which runs with a limited
# feature set (no PTX JIT of newer PTX). eksbench requires the toolkit driver's branch: that is where the
# DLC's own start_cuda_compat.sh stops adding the compat package, so skipping it loses nothing.
CUDA_DRIVERS: dict[str, CudaDriver] = {
    # 11.8 GA >= 520.61.05 (Table 3); 11.x minor compatibility >= 450.80.02 (Table 1).
    "11.8": CudaDriver("520.61.05", 450, "CUDA Toolkit Release Notes, Table 3; CUDA Compatibility, Table 1"),
    "12.6": CudaDriver("560.35.05", 525, "CUDA Toolkit Release Notes, Table 3; CUDA Compatibility, Table 1"),
    "13.0": CudaDriver("580.95.05", 580, "CUDA Toolkit Release Notes, Table 3; CUDA Compatibility, Table 1"),
    # 12.9 Update 1 ships driver 575.57.08 (NVIDIA's installer cuda_12.9.1_575.57.08_linux.run).
    "12.9": CudaDriver("575.57.08", 525, "CUDA Toolkit Release Notes, Table 3; CUDA Compatibility, Table 1"),
}

# Compute capability per GPU model: NVIDIA "CUDA GPUs - Compute Capability" (developer.nvidia.com/cuda-gpus):
# V100 7.0, T4 7.5, A100 8.0, A10 (AWS's A10G) 8.6, L4 and L40S 8.9, H100 and H200 9.0.
GPU_ARCH: dict[str, str] = {
    "V100": "7.0", "T4": "7.5", "A100": "8.0", "A10G": "8.6", "L4": "8.9", "L40S": "8.9", "H100": "9.0",
    "H200": "9.0",
}

# The NVIDIA driver of the EKS GPU AMIs (managed node groups take the newest AMI release).
# AL2023: awslabs/amazon-eks-ami CHANGELOG.md, AMI Release v20260714 (and every release back to v20260610):
# kmod-nvidia-latest-dkms 580.159.03-1.amzn2023 on AL2023_x86_64_NVIDIA for Kubernetes 1.30-1.36; the
# branch is templates/al2023/variables-default.json nvidia_driver_major_version "580" (580 since
# 2025-10-22 for 1.34+, 2025-11-10 for 1.29/1.30: commits 3cb8b058, 00da59fb). From v20260917 the AMI
# carries 580 and 595 and picks one per instance type at first boot (awslabs/amazon-eks-ami#2768); 595 is
# not for P3/P3dn (doc/usage/g7-ami.md), so 580 is the floor on every type here: what is knowable is
# "580, or 595 on the newest types". Bottlerocket: "All Bottlerocket AMIs are on 580"
# (bottlerocket-os/bottlerocket-kernel-kit#254, 2026-01-29; 580.126.09 in #357).
# V100 (sm_70) after its last supported image. CUDA 13.0 removed Volta ("offline compilation and library
# support for these architectures have been removed", CUDA 13.0 release notes, Deprecated Architectures),
# and no PyTorch training DLC still in patch support on 2026-11-27 has sm_70 kernels: 2.10 and later are
# cu130; the last with Volta, 2.8.0 cu129 and 2.6.0 cu126, left patch support on 2026-08-06 and 2026-01-29
# (aws/deep-learning-containers docs/src/data/pytorch-training/2.{6,8,10}-gpu-ec2.yml). PyTorch's own cu126
# wheels keep Volta kernels (7.0) through the 2.14 release line (pytorch/pytorch .ci/manywheel/build_cuda.sh,
# RFC #190355); AWS's CUDA 12.9 base image is in support until 2028-06-30
# (docs/src/data/base/cu129-runtime.yml). So on V100 the default stays the 2.6.0 cu126 DLC, and the plan
# says it is out of support and how to build a supported one.
SM70_AFTER_SUPPORT = ("no PyTorch DLC in AWS's patch support has V100 (sm_70) kernels; for a patched image build "
                      "one FROM public.ecr.aws/deep-learning-containers/base:runtime-cu129-amzn2023 (in support "
                      "until 2028-06-30) with torch from https://download.pytorch.org/whl/cu126 (PyTorch's cu126 "
                      "wheels keep sm_70 through 2.14) and what workloads/Dockerfile adds, push it, and set the "
                      "experiments' image: to its URI")


def past_patch_support(row: TrainingImage, today: str) -> bool:
    """Whether AWS stopped patching ``row`` (its end of patch is before ``today``, ISO dates)."""
    return bool(row.end_of_patch) and row.end_of_patch < today


# Frameworks whose GPU path has not run anywhere yet, and why it is in doubt: the plan warns on a GPU group.
NOT_VERIFIED_ON_GPUS: dict[str, str] = {}

# Frameworks whose trainer cannot train on GPUs in the pinned release, and why: the cluster refuses them (every node
# group is a GPU group); `eksbench run --local` still runs them on CPUs.
# Paddle 3.0.0's parameter servers: GEO mode (a_sync with k_steps, workloads/train/paddle/ps.py) is the only PS mode
# that trains with that wheel (sync mode crashes in SendBarrierOp, plain async never refreshes a trainer's dense
# parameters), and GEO has no GPU path for dense parameters: GeoCommunicator::SendDense/RecvDense
# (paddle/fluid/distributed/ps/service/communicator/communicator.cc) run CPU BLAS (VSUB/VADD) on the parameter
# tensors with no is_gpu_place branch, where RpcRecvDense/RpcSendDenseParam in the same file have one; "PS-GPU
# support GEO" (PaddlePaddle/Paddle#31689) was closed unmerged.
NO_GPU_TRAINING = {
    "paddle": ("Paddle 3.0.0's parameter servers train only in GEO mode, which has no GPU path for dense parameters "
               "(GeoCommunicator::SendDense/RecvDense run CPU BLAS on them; PaddlePaddle/Paddle#31689 closed "
               "unmerged), and sync and plain async PS modes do not train with that release"),
}

AMI_DRIVERS: dict[str, AmiDriver] = {
    "AL2023_x86_64_NVIDIA": AmiDriver(580, "580.159.03", "awslabs/amazon-eks-ami CHANGELOG v20260714"),
    "BOTTLEROCKET_x86_64_NVIDIA": AmiDriver(580, "580.126.09", "bottlerocket-os/bottlerocket-kernel-kit#254, #357"),
}

# Where DLCs are pulled from: a regional ECR (<account>.dkr.ecr.<region>.amazonaws.com[.cn]) or ECR Public.
PUBLIC_DLC_PREFIX = "public.ecr.aws/deep-learning-containers/"


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def sm(cc: str) -> str:
    """``"7.0"`` -> ``"sm_70"``, the name in nvcc flags and CUDA errors."""
    major, minor = _cc(cc)
    return f"sm_{major}{minor}"


def gpu_arch(instance_type: str) -> str | None:
    """The compute capability of ``instance_type``'s GPUs; None for a CPU type or a GPU not in GPU_ARCH."""
    spec = catalog.INSTANCE_TYPES.get(instance_type)
    return GPU_ARCH.get(spec.gpu_model) if spec and spec.gpus else None


def find_image(image: str) -> TrainingImage | None:
    """The table's row for ``image`` (a DLC of a known tag, from any region or ECR Public), or None."""
    ref = image.split("@", 1)[0]
    path, _, tag = ref.rpartition(":")
    if not path or "/" in tag:
        return None
    if path in (pins.PADDLE_REPOSITORY, f"docker.io/{pins.PADDLE_REPOSITORY}"):  # Docker Hub, by its full name
        return next((row for row in IMAGES if row.repository == pins.PADDLE_REPOSITORY and tag in row.tags), None)
    if not (".dkr.ecr." in path or path.startswith(PUBLIC_DLC_PREFIX)):
        return None
    repository = path.rsplit("/", 1)[-1]
    return next((row for row in IMAGES if row.repository == repository and tag in row.tags), None)


def has_kernels(row: TrainingImage, cc: str) -> bool:
    """Whether ``row`` runs on a GPU of compute capability ``cc``: SASS of the same major, not newer, or older PTX."""
    major, minor = _cc(cc)
    sass = any(m == major and n <= minor for m, n in map(_cc, row.sass))
    return sass or any(_cc(p) <= (major, minor) for p in row.ptx)


def kernel_problem(row: TrainingImage, instance_type: str) -> str:
    """Why ``row`` has no kernels for ``instance_type``'s GPUs, or "" when it has (or the GPU is unknown)."""
    cc = gpu_arch(instance_type)
    if cc is None or has_kernels(row, cc):
        return ""
    model = catalog.INSTANCE_TYPES[instance_type].gpu_model
    built = ", ".join(sm(c) for c in row.sass) + "".join(f", PTX for {sm(c)}" for c in row.ptx)
    return (f"{row.name} has kernels for {built} only, not for the {model} GPUs ({sm(cc)}) of {instance_type}: "
            f'the first CUDA kernel fails with "no kernel image is available for execution on the device"')


def driver_problem(row: TrainingImage, ami_type: str) -> str:
    """Why the AMI's driver is too old for ``row``'s CUDA without the compat package, or ""."""
    need, have = CUDA_DRIVERS[row.cuda], AMI_DRIVERS.get(ami_type)
    if have is None or have.branch >= need.branch:
        return ""
    return (f"{row.name} needs NVIDIA driver {need.toolkit_driver} or newer (branch {need.branch}), but "
            f"{ami_type} has branch {have.branch}; the pods skip the image's start_cuda_compat.sh, so the "
            f"forward-compatibility package cannot make up the difference")


def pair_problems(row: TrainingImage, instance_type: str, ami_type: str) -> list[str]:
    """Every reason ``row`` cannot train on a node group of ``instance_type`` with ``ami_type``."""
    return [p for p in (kernel_problem(row, instance_type), driver_problem(row, ami_type)) if p]


def default_row(instance_type: str, ami_type: str, framework: str = "pytorch") -> TrainingImage:
    """The first stock image of ``framework`` in ``IMAGES`` that runs on the group; its first stock row where
    none does (the plan says why). A framework with no stock row (Horovod: its images are built by the user)
    gets PyTorch's for the group (``framework_support.check_experiment`` refuses it, saying what to build), as does an
    unknown framework (the stack's parser has refused it)."""
    rows = ([row for row in IMAGES if row.framework == framework and row.stock]
            or [row for row in IMAGES if row.framework == "pytorch"])
    return next((row for row in rows if not pair_problems(row, instance_type, ami_type)), rows[0])


def image_ref(row: TrainingImage, region: str, tag: str | None = None) -> str:
    """``row``'s image (its pinned tag, or ``tag``): a DLC in ``region``'s registry; one from Docker Hub
    (an ``<organization>/<name>`` repository: paddle's) by its own name."""
    tag = tag or row.tags[0]
    if "/" in row.repository:
        return f"{row.repository}:{tag}"
    return pins.training_image(region, tag, row.repository)


def default_image(instance_type: str, ami_type: str, region: str, framework: str = "pytorch") -> str:
    """The default training image of ``framework`` on a node group (a DLC in ``region``'s registry, or Docker Hub's)."""
    return image_ref(default_row(instance_type, ami_type, framework), region)
