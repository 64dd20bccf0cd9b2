"""An oracle for the image/GPU/driver table (core/catalog/compat.py), written from its raw rows rather than from the
functions under test, so a slip in ``core.catalog.compat`` cannot hide itself."""

from __future__ import annotations

from core.catalog import aws as catalog
from core.catalog import compat


def oracle_runs(row: compat.TrainingImage, instance_type: str, ami_type: str) -> bool:
    """SASS of the GPU's major and a minor not above it, or PTX not above it; and the AMI's driver branch at
    least the branch of the toolkit driver of the image's CUDA."""
    major, minor = map(int, compat.GPU_ARCH[catalog.INSTANCE_TYPES[instance_type].gpu_model].split("."))
    sass = [tuple(map(int, c.split("."))) for c in row.sass]
    ptx = [tuple(map(int, c.split("."))) for c in row.ptx]
    kernels = any(m == major and n <= minor for m, n in sass) or any(p <= (major, minor) for p in ptx)
    need = int(compat.CUDA_DRIVERS[row.cuda].toolkit_driver.split(".")[0])
    return kernels and compat.AMI_DRIVERS[ami_type].branch >= need
