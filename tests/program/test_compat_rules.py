"""The plan's rule built on the image/GPU/driver table (``program.image_checks``: an image without kernels for
the group's GPUs, or needing a newer driver than its AMI's, is a meaning problem; an image outside the table a
warning), checked with the oracle written from the table's raw rows (tests/support/compat_oracle.py): every
(image, node group) pair of generated stacks is rejected exactly when it cannot run; every default runs.
The table itself is tested in tests/core/test_compat.py.
"""

from __future__ import annotations

import itertools

import pytest

from core.catalog import aws as catalog
from core.catalog import compat, pins
from core.config.shape import parse_stack_config
from program.image_checks import image_advisories
from program.validation import meaning_problems
from tests.core.test_compat import GPU_TYPES, REGION
from tests.support.compat_oracle import oracle_runs


def stack(instance_type: str, ami_type: str, **experiment):
    raw = {"results": {"home_stack": "organization/eksbench/home"}, "cluster": {"public_access_cidrs": []},
           "gpu_node_groups": [{"name": "gpu", "instance_type": instance_type, "ami_type": ami_type,
                                "max_size": 1}],
           "experiments": [{"name": "x", "steps": 10, **experiment}]}
    return parse_stack_config(raw, project="eksbench", stack="t", region=REGION)


def image_problems_of(cfg) -> list[str]:
    return [p for p in meaning_problems(cfg) if p.startswith("experiments[0].image=")]


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
        cfg = stack(instance_type, ami_type, image=compat.image_ref(row, REGION, tag),
                    framework=row.framework)
        problems = image_problems_of(cfg)
        assert (problems == []) is oracle_runs(row, instance_type, ami_type), (tag, problems)
        unverified = [f"not verified on GPUs: {compat.NOT_VERIFIED_ON_GPUS[row.framework]}"] \
            if row.framework in compat.NOT_VERIFIED_ON_GPUS else []
        assert [n.split(": ", 1)[1].split("; its numbers")[0] for n in image_advisories(cfg)] == unverified


@pytest.mark.parametrize("instance_type, ami_type, framework",
                         list(itertools.product(GPU_TYPES, catalog.GPU_AMI_TYPES, ("pytorch", "tensorflow"))))
def test_every_gpu_type_gets_a_default_image_that_runs_there(instance_type, ami_type, framework):
    cfg = stack(instance_type, ami_type, framework=framework)
    row = compat.find_image(cfg.experiments[0].image)
    assert row is not None and oracle_runs(row, instance_type, ami_type), cfg.experiments[0].image
    assert row.framework == framework and image_problems_of(cfg) == []
    # The preferred (newest) image wherever it runs: only GPUs it lacks kernels for get another.
    first = next(r for r in compat.IMAGES if r.framework == framework)
    assert (row == first) is oracle_runs(first, instance_type, ami_type)


def test_an_image_of_another_framework_is_refused_by_key():
    cfg = stack("g5.2xlarge", "AL2023_x86_64_NVIDIA", framework="tensorflow", image=pins.TRAINING_IMAGE)
    [line] = image_problems_of(cfg)
    assert "a pytorch image" in line and pins.TF_DLC_TAG in line


def test_a_custom_image_is_a_warning_naming_the_key_and_the_group():
    cfg = stack("p3.16xlarge", "AL2023_x86_64_NVIDIA", image="example.com/team/trainer:1.0")
    assert image_problems_of(cfg) == []
    [note] = image_advisories(cfg)
    assert note.startswith('experiments[0].image="example.com/team/trainer:1.0": not in core/catalog/compat.py')
    assert "'gpu'" in note and "sm_70" in note


def test_paddle_is_refused_on_the_cluster_and_runs_locally():
    """Paddle 3.0.0's GEO parameter servers have no GPU path for dense parameters (compat.NO_GPU_TRAINING): every
    node group is a GPU group, so the cluster's check refuses the experiment by key, with the reason and what to
    do; a local run (cluster=False) trains it on CPUs."""
    cfg = stack("p3.16xlarge", "AL2023_x86_64_NVIDIA", framework="paddle", image=pins.PADDLE_IMAGE)
    (refusal,) = [p for p in meaning_problems(cfg) if ".framework" in p]
    assert refusal.startswith('experiments[0].framework="paddle": cannot train on node group ')
    assert "GeoCommunicator::SendDense/RecvDense" in refusal and "--local" in refusal and 'e.g. "pytorch"' in refusal
    assert not [p for p in meaning_problems(cfg, cluster=False) if ".framework" in p]
    assert not [p for p in meaning_problems(stack("p3.16xlarge", "AL2023_x86_64_NVIDIA")) if ".framework" in p]


def test_an_image_past_awss_patch_support_is_named_with_what_to_use_instead():
    """The V100 default, the PyTorch 2.6.0 cu126 DLC, left patch support on 2026-01-29; no supported DLC has
    sm_70 kernels, so the plan says how to build a patched one. A supported image gets no such warning."""
    v100 = stack("p3.16xlarge", "AL2023_x86_64_NVIDIA")
    row = compat.find_image(v100.experiments[0].image)
    assert row.framework_version == "2.6.0" and row.end_of_patch == "2026-01-29"
    [note] = [n for n in image_advisories(v100, "2026-11-27") if "patch support" in n]
    assert note.startswith('gpu_node_groups[0].instance_type="p3.16xlarge": the default image it gives x')
    assert "left AWS's patch support on 2026-01-29" in note
    assert "base:runtime-cu129-amzn2023" in note and "whl/cu126" in note
    assert not [n for n in image_advisories(v100, "2026-01-29") if "patch support" in n]  # its last day
    assert not [n for n in image_advisories(v100) if "patch support" in n]  # no clock, no date check
    a100 = stack("p4d.24xlarge", "AL2023_x86_64_NVIDIA")
    assert compat.find_image(a100.experiments[0].image).end_of_patch == "2027-01-21"
    assert not [n for n in image_advisories(a100, "2026-11-27") if "patch support" in n]


def test_a_default_images_warning_names_the_group_setting_that_chose_it_once_for_all_its_experiments():
    """Two experiments that set no image get the V100 default, past patch support: one warning, attributed to the
    node group's instance_type (the key the user set), naming both experiments, whole (it ends on what to do)."""
    raw = {"results": {"home_stack": "organization/eksbench/home"}, "cluster": {"public_access_cidrs": []},
           "gpu_node_groups": [{"name": "gpu", "instance_type": "p3.16xlarge", "ami_type": "AL2023_x86_64_NVIDIA",
                                "max_size": 2}],
           "experiments": [{"name": "a", "steps": 10}, {"name": "b", "steps": 10}]}
    cfg = parse_stack_config(raw, project="eksbench", stack="t", region=REGION)
    [note] = image_advisories(cfg, "2026-11-27")
    assert note.startswith('gpu_node_groups[0].instance_type="p3.16xlarge": the default image it gives a, b '
                           f'(no image: set), "{cfg.experiments[0].image}": ')
    assert "experiments[" not in note and note.endswith("set the experiments' image: to its URI")


def test_an_image_the_stack_sets_is_warned_once_by_every_key_that_sets_it():
    raw = {"results": {"home_stack": "organization/eksbench/home"}, "cluster": {"public_access_cidrs": []},
           "gpu_node_groups": [{"name": "gpu", "instance_type": "p3.16xlarge", "ami_type": "AL2023_x86_64_NVIDIA",
                                "max_size": 2}],
           "experiments": [{"name": n, "steps": 10, "image": "example.com/team/trainer:1.0"} for n in ("a", "b")]}
    cfg = parse_stack_config(raw, project="eksbench", stack="t", region=REGION)
    [note] = image_advisories(cfg, "2026-11-27")
    assert note.startswith('experiments[0].image, experiments[1].image="example.com/team/trainer:1.0": not in ')
