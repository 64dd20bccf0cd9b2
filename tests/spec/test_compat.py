"""The image/GPU/driver compatibility table (spec/compat.py) and the plan's rule built on it.

The whole class, checked with an oracle written from the table's raw rows (not from the functions under
test): every (image, node group) pair of generated stacks (every GPU type of the catalog x every image of
the table x every GPU AMI type) is rejected exactly when the image has no kernels for the GPUs or needs a
newer driver than the AMI's; every default is one that runs. The shipped stacks' planned pods are walked in
tests/infra/test_image_compat.py.
"""

from __future__ import annotations

import itertools

import pytest

from program.validation import image_advisories, meaning_problems
from spec import aws_catalog as catalog
from spec import compat, pins
from spec.shape import parse_stack_config
from tests.support.compat_oracle import oracle_runs

GPU_TYPES = sorted(t for t, spec in catalog.INSTANCE_TYPES.items() if spec.gpus)
REGION = "us-west-2"


def stack(instance_type: str, ami_type: str, **experiment):
    raw = {"results": {"home_stack": "organization/eksbench/home"}, "cluster": {"public_access_cidrs": []},
           "gpu_node_groups": [{"name": "gpu", "instance_type": instance_type, "ami_type": ami_type,
                                "max_size": 1}],
           "experiments": [{"name": "x", "steps": 10, **experiment}]}
    return parse_stack_config(raw, project="eksbench", stack="t", region=REGION)


def image_problems_of(cfg) -> list[str]:
    return [p for p in meaning_problems(cfg) if p.startswith("experiments[0].image=")]


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


def test_the_old_default_cannot_train_on_the_dev_stack_and_the_plan_says_so():
    """The fault: the CUDA 13 DLC on p3.16xlarge (V100, sm_70). Named by key, value and group."""
    cfg = stack("p3.16xlarge", "AL2023_x86_64_NVIDIA", image=pins.training_image(REGION))
    [line] = image_problems_of(cfg)
    assert line.startswith(f'experiments[0].image="{pins.training_image(REGION)}": ')
    assert "node group 'gpu'" in line and "sm_70" in line and pins.DLC_TAG_CU126 in line


@pytest.mark.parametrize("instance_type, row, ami_type",
                         list(itertools.product(GPU_TYPES, compat.IMAGES, catalog.GPU_AMI_TYPES)),
                         ids=lambda v: v.tags[0] if isinstance(v, compat.TrainingImage) else str(v))
def test_every_explicit_image_on_every_gpu_type_is_judged_as_the_table_says(instance_type, row, ami_type):
    for tag in row.tags:
        image = (pins.training_image(REGION, tag) if row.framework == "pytorch"
                 else pins.horovod_image("123456789012", REGION, tag))
        cfg = stack(instance_type, ami_type, image=image)
        problems = image_problems_of(cfg)
        assert (problems == []) is oracle_runs(row, instance_type, ami_type), (tag, problems)
        assert image_advisories(cfg) == []


@pytest.mark.parametrize("instance_type, ami_type", list(itertools.product(GPU_TYPES, catalog.GPU_AMI_TYPES)))
def test_every_gpu_type_gets_a_default_image_that_runs_there(instance_type, ami_type):
    cfg = stack(instance_type, ami_type)
    row = compat.find_image(cfg.experiments[0].image)
    assert row is not None and oracle_runs(row, instance_type, ami_type), cfg.experiments[0].image
    assert image_problems_of(cfg) == []
    # The preferred (newest) image wherever it runs: only GPUs it lacks kernels for get another.
    assert (row == compat.IMAGES[0]) is oracle_runs(compat.IMAGES[0], instance_type, ami_type)


def test_a_custom_image_is_a_warning_naming_the_key_and_the_group():
    cfg = stack("p3.16xlarge", "AL2023_x86_64_NVIDIA", image="example.com/team/trainer:1.0")
    assert image_problems_of(cfg) == []
    [note] = image_advisories(cfg)
    assert note.startswith('experiments[0].image="example.com/team/trainer:1.0": not in spec/compat.py')
    assert "'gpu'" in note and "sm_70" in note
