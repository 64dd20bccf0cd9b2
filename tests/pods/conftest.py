"""The shipped stacks' plans, scaled down by their ``local:`` sections, and a sandboxed cluster for
each whose Jobs have run (tests/support/pod_sandbox.py says what stands in for what)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from program.stack_files import ROOT
from tests.program.test_program import P5_FILLED


def _need_tools() -> None:
    for tool in ("bwrap", "setpriv", "nsenter", "etcd"):
        if not shutil.which(tool):
            pytest.skip(f"no {tool} on PATH (.ci/setup-tests installs bubblewrap and etcd-server)")


def scaled_plan(stack: str, config: dict):
    from program.offline import evaluate_config
    from tests.support.sandbox_cluster import scaled_config

    return evaluate_config(stack, scaled_config(config))


@pytest.fixture(scope="session")
def dev_plan():
    return scaled_plan("dev", yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])


@pytest.fixture(scope="session")
def fsx_plan():
    return scaled_plan("p5-fsx", P5_FILLED)


@pytest.fixture(scope="session")
def dev_cluster(dev_plan, tmp_path_factory):
    from tests.support.sandbox_cluster import SandboxCluster

    _need_tools()
    with SandboxCluster(dev_plan, tmp_path_factory.mktemp("dev-cluster")) as cluster:
        cluster.run_all()
        yield cluster


@pytest.fixture(scope="session")
def fsx_cluster(fsx_plan, tmp_path_factory):
    """p5-fsx: staging (FSx mode, the association's import stood in) and the EFA synthetic experiment.
    The ImageNet experiment's Jobs are not run, to keep within the suite's time budget: their pods
    differ from the synthetic one's by the dataset and the compile cache volume."""
    from tests.support.sandbox_cluster import SandboxCluster

    _need_tools()
    with SandboxCluster(fsx_plan, tmp_path_factory.mktemp("fsx-cluster")) as cluster:
        cluster.run_all(only=lambda name, job: "resnet50-imagenet" not in name)
        yield cluster
