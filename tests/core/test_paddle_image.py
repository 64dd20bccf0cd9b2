"""Paddle's default image (pure, spec only)."""

from __future__ import annotations

from core.catalog import compat, pins
from core.config.shape import parse_stack_config


def paddle_on(instance_type: str, **experiment):
    raw = {"results": {"home_stack": "organization/eksbench/home"}, "cluster": {"public_access_cidrs": []},
           "gpu_node_groups": [{"name": "gpu", "instance_type": instance_type, "max_size": 2}],
           "experiments": [{"name": "pd", "framework": "paddle", "nodes": 2, "pservers": 2, **experiment}]}
    return parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2").experiments[0]


def test_a_paddle_experiment_defaults_to_the_official_paddle_image_with_volta_kernels():
    e = paddle_on("p3.16xlarge")
    assert e.image == pins.PADDLE_IMAGE == "paddlepaddle/paddle:3.0.0-gpu-cuda11.8-cudnn8.9-trt8.6"
    row = compat.find_image(e.image)
    assert row is not None and row.framework == "paddle"
    assert compat.pair_problems(row, "p3.16xlarge", "AL2023_x86_64_NVIDIA") == []
    assert compat.find_image("docker.io/" + pins.PADDLE_IMAGE) is row


def test_the_paddle_cuda_11_8_build_says_it_has_no_hopper_kernels():
    """What the table knows of the image (no sm_90 in any of Paddle's CUDA 11 release strategies)."""
    row = compat.find_image(pins.PADDLE_IMAGE)
    assert "sm_90" in compat.kernel_problem(row, "p5.48xlarge")
    assert compat.default_image("p3.16xlarge", "AL2023_x86_64_NVIDIA", "us-west-2") != pins.PADDLE_IMAGE
