"""The real thing: ``bench run`` on a tiny stack in a real AWS account: pulumi up -> run -> destroy.

Skipped where the Pulumi CLI or AWS credentials are missing (always on the build machines:
FACTS.md, "What runs on our machines"). Costs roughly $1 (one g4dn.xlarge, EKS control plane,
NAT for ~30 min). Set EKSBENCH_CLOUD_REGION to choose the region (default us-west-2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.lifecycle.conftest import ROOT

pytestmark = pytest.mark.cloud


def _why_not() -> str | None:
    if shutil.which("pulumi") is None:
        return "the Pulumi CLI is not on PATH"
    if os.environ.get("AWS_ENDPOINT_URL"):
        return "AWS_ENDPOINT_URL is set (an emulator, not AWS)"
    try:
        import boto3

        boto3.client("sts").get_caller_identity()
    except Exception as e:  # noqa: BLE001
        return f"no AWS credentials ({type(e).__name__})"
    return None


def test_tiny_stack_up_run_destroy(tmp_path):
    _run_tiny(tmp_path, {"min_size": 0, "desired_size": 1, "max_size": 1})


def test_an_autoscaled_group_scales_from_zero_for_its_run(tmp_path):
    """Cluster Autoscaler (gpu_node_groups[].autoscale) brings the group up from 0 nodes for the pending Job:
    the node-template tags, the chart pin and its Pod Identity role all have to be right for the run to start."""
    _run_tiny(tmp_path, {"autoscale": True, "desired_size": 0, "max_size": 1})


def _run_tiny(tmp_path, group: dict) -> None:
    why = _why_not()
    if why:
        pytest.skip(why)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    config = {"aws:region": os.environ.get("EKSBENCH_CLOUD_REGION", "us-west-2"),
              "eksbench:run_id": f"ci-{os.getpid()}",
              "eksbench:network": {"az_count": 2, "nat": "single"},
              # Who may reach the API endpoint: the machine running the test.
              "eksbench:cluster": {"public_access_cidrs": [os.environ.get("EKSBENCH_CLOUD_CIDR", "0.0.0.0/0")]},
              "eksbench:gpu_node_groups": [{"name": "g4", "instance_type": "g4dn.xlarge", **group}],
              "eksbench:system_nodes": {"instance_type": "m6i.large", "desired_size": 1, "min_size": 1},
              "eksbench:experiments": [{"name": "tiny", "workload": "resnet50", "nodes": 1, "steps": 20,
                                        "batch_size": 16, "dataset": "synthetic", "timeout_minutes": 20}]}
    (project / "Pulumi.tiny.yaml").write_text(yaml.safe_dump({"config": config}))
    done = subprocess.run([sys.executable, "-m", "bench", "run", "tiny", "--yes", "--project-dir", str(project),
                           "--results-root", str(tmp_path / "results"), "--max-cost", "5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=3 * 3600)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert "destroyed in" in done.stdout
    assert (tmp_path / "results" / "tiny" / config["eksbench:run_id"] / "tiny" / "summary.json").is_file()
