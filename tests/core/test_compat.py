"""The image/GPU/driver compatibility table (core/catalog/compat.py): every GPU type has an architecture, every AMI
and CUDA a driver row, the pinned images are rows. The plan's rule built on it, checked with an oracle
written from the table's raw rows against every (image, node group) pair of generated stacks, is in
tests/program/test_compat_rules.py; the shipped stacks' planned pods are walked in
tests/program/test_image_compat.py.
"""

from __future__ import annotations

import pytest

from core.catalog import aws as catalog
from core.catalog import compat, pins

GPU_TYPES = sorted(t for t, spec in catalog.INSTANCE_TYPES.items() if spec.gpus)
REGION = "us-west-2"


def test_every_gpu_type_of_the_catalog_has_an_architecture():
    assert GPU_TYPES
    for t in GPU_TYPES:
        assert compat.gpu_arch(t) is not None, t


def test_every_gpu_ami_type_and_every_cuda_of_the_table_has_a_driver_row():
    for ami in catalog.GPU_AMI_TYPES:
        assert compat.AMI_DRIVERS[ami].branch >= 580, ami
    for row in compat.IMAGES:
        assert row.cuda in compat.CUDA_DRIVERS and row.source and row.sass, row


def test_the_pinned_images_are_rows_of_the_table():
    for tag in (pins.DLC_TAG, pins.DLC_TAG_CU126):
        row = compat.find_image(pins.training_image(REGION, tag))
        assert row is not None and row.tags[0] == tag
    # The facts: the CUDA 13 build has no Volta; the CUDA 12.6 build has.
    assert not compat.has_kernels(compat.find_image(pins.TRAINING_IMAGE), "7.0")
    assert compat.has_kernels(compat.find_image(pins.training_image(REGION, pins.DLC_TAG_CU126)), "7.0")


@pytest.mark.parametrize("image, found", [
    (pins.training_image("cn-north-1"), True),
    (pins.training_image("eu-south-1", pins.DLC_TAG_CU126), True),
    (f"{compat.PUBLIC_DLC_PREFIX}pytorch-training:2.10-gpu-py313-ec2", True),
    (pins.TRAINING_IMAGE + "@sha256:" + "0" * 64, True),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training@sha256:" + "0" * 64, False),
    ("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.9.0-gpu-py312-cu130-ubuntu22.04-ec2", False),
    ("docker.io/library/pytorch-training:" + pins.DLC_TAG, False),
    ("horovod/horovod:0.28.1", False),
])
def test_find_image_knows_dlcs_of_the_table_only(image, found):
    assert (compat.find_image(image) is not None) is found
