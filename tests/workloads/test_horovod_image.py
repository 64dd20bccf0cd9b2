"""Horovod on the cluster: no AWS DLC has it, so a Horovod experiment names the image built from
workloads/Dockerfile.horovod; the plan refuses the DLC default with that reason, knows the built images'
CUDA builds (core/catalog/compat.py), and the Dockerfile builds what the local venv builds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from core.catalog import compat, pins
from core.config.model import Experiment
from workloads.framework_support import check_experiment

ROOT = Path(__file__).resolve().parents[2]
BUILT = pins.horovod_image("123456789012", "us-west-2")
BUILT_CU126 = pins.horovod_image("123456789012", "us-west-2", pins.HOROVOD_TAG_CU126)


def test_the_dlc_default_is_refused_for_horovod_with_the_reason_and_what_to_build():
    e = Experiment(name="h", framework="horovod", min_nodes=2, max_nodes=2)
    [problem] = check_experiment(e)
    assert problem.startswith(f'image="{pins.TRAINING_IMAGE}": a pytorch image; framework "horovod" needs an image that has it')
    assert "no AWS Deep Learning Container has Horovod" in problem and "workloads/Dockerfile.horovod" in problem
    assert check_experiment(replace(e, image=BUILT)) == []


def test_the_built_images_are_rows_with_their_bases_kernels():
    row, row126 = compat.find_image(BUILT), compat.find_image(BUILT_CU126)
    assert row.framework == row126.framework == "horovod"
    dlc, dlc126 = compat.find_image(pins.TRAINING_IMAGE), compat.find_image(pins.training_image("us-west-2",
                                                                                             pins.DLC_TAG_CU126))
    assert (row.cuda, row.sass, row.ptx) == (dlc.cuda, dlc.sass, dlc.ptx)
    assert (row126.cuda, row126.sass, row126.ptx) == (dlc126.cuda, dlc126.sass, dlc126.ptx)
    # V100 (p3, the dev stack's group) needs the CUDA 12.6 build, as PyTorch's own images do.
    assert compat.kernel_problem(row, "p3.16xlarge") and not compat.kernel_problem(row126, "p3.16xlarge")
    # A Horovod row is never a PyTorch experiment's default.
    assert all(compat.default_row(t, "AL2023_x86_64_NVIDIA").framework == "pytorch"
               for t in ("p3.16xlarge", "g5.xlarge", "p5.48xlarge"))


def test_the_dockerfile_builds_the_venvs_sdist_with_the_same_patch_and_the_tables_architectures():
    docker = (ROOT / "workloads" / "Dockerfile.horovod").read_text()
    hook = (ROOT / ".ci" / "frameworks" / "horovod.sh").read_text()
    sha = re.search(r"HOROVOD_SDIST_SHA256=([0-9a-f]{64})", hook).group(1)
    assert sha in docker and f"horovod=={pins.HOROVOD_VERSION}" in docker
    assert "COPY .ci/frameworks/horovod-cxx17.patch" in docker
    for flag in ("HOROVOD_WITHOUT_MPI=1", "HOROVOD_WITH_GLOO=1", "HOROVOD_WITH_PYTORCH=1"):
        assert flag in docker and flag in hook
    base = re.search(r"ARG BASE_TAG=(\S+)", docker).group(1)
    assert base == pins.DLC_TAG
    cc = re.search(r"ARG CUDA_CC_LIST=(\S+)", docker).group(1)
    sass = compat.find_image(BUILT).sass
    assert cc.split(",") == [s.replace(".", "") for s in sass]
    cc126 = re.search(r"--build-arg CUDA_CC_LIST=(\S+)", docker).group(1)
    assert cc126.split(",") == [s.replace(".", "") for s in compat.find_image(BUILT_CU126).sass]
    assert f"BASE_TAG={pins.DLC_TAG_CU126}" in docker and pins.HOROVOD_TAG in docker and pins.HOROVOD_TAG_CU126 in docker
