"""The summary's what_ran: each field from where it can be known, null with a reason where it cannot."""

from __future__ import annotations

import json
import platform
import sys

from core.config.model import GpuNodeGroup
from core.contract import summary_fields as F
from workloads.pod_manifests import what_ran_env
from workloads.train.harness import launch
from workloads.train.harness.what_ran import (
    JOB_ENV,
    LOCAL_IMAGE,
    efa_version,
    image_digest,
    what_ran,
)

DIGEST = "sha256:" + "ab" * 32
P5 = GpuNodeGroup(name="h100", instance_type="p5.48xlarge", capacity_type="CAPACITY_BLOCK", efa=True,
                  placement_group=True, availability_zone="us-east-1a", min_size=2, desired_size=2, max_size=2)
# NCCL prefixes a net plugin's INFO lines with "NET/OFI"; aws-ofi-nccl logs "Using " PACKAGE_STRING.
OFI_LOG = "ip-10-0-1-2:51:51 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.13.2\n"
EFA_FILE = "# EFA installer version: 1.38.0\n# Debug packages installed: no\n"


def job_environ(group: GpuNodeGroup, image: str, region: str = "us-east-1") -> dict[str, str]:
    """The pod's env as the Job builder writes it (the stack's region: AWS_REGION)."""
    return {JOB_ENV[F.IMAGE]: image, **{JOB_ENV[k]: v for k, v in what_ran_env(group).items()},
            JOB_ENV[F.REGION]: region}


def test_a_gpu_pod_knows_what_the_job_the_trainer_and_the_container_tell_it():
    device = {"name": "NVIDIA H100 80GB HBM3", "torch": "2.10.0", "cuda": "13.0", "cudnn": 91300, "nccl": "2.27.7",
              "driver": "580.95.05"}
    ran, why = what_ran(environ=job_environ(P5, f"repo/pytorch@{DIGEST}"), device=device, nodes=2,
                        log_texts=["nothing here", OFI_LOG], efa_installed=EFA_FILE, kernel="6.12.40")
    assert list(ran) == list(F.WHAT_RAN_FIELDS)
    assert ran == {"image": f"repo/pytorch@{DIGEST}", "image_digest": DIGEST, "torch": "2.10.0", "cuda": "13.0",
                   "cudnn": "91300", "nccl": "2.27.7", "aws_ofi_nccl": "1.13.2", "efa_installer": "1.38.0",
                   "driver": "580.95.05", "kernel": "6.12.40", "ami_type": "AL2023_x86_64_NVIDIA", "ami_release": None,
                   "instance_type": "p5.48xlarge", "region": "us-east-1", "zone": "us-east-1a",
                   "capacity_type": "CAPACITY_BLOCK",
                   "placement_group": "cluster", "node_group": "h100", "nodes": 2}
    assert set(why) == {"ami_release"} and "cannot read it" in why["ami_release"]


def test_unknowns_are_null_with_their_reason_never_guessed():
    group = GpuNodeGroup(name="v100", instance_type="p3.16xlarge")  # no zone pinned: it may span zones
    ran, why = what_ran(environ=job_environ(group, "repo/pytorch:2.6.0-gpu"), device=None, nodes=None,
                        log_texts=[], efa_installed=None, kernel="6.1")
    assert ran["zone"] is ran["image_digest"] is ran["torch"] is ran["aws_ofi_nccl"] is ran["efa_installer"] is None
    assert "spans zones" in why["zone"] and "pinned by tag" in why["image_digest"]
    assert "did not report" in why["torch"] and "NET/OFI" in why["aws_ofi_nccl"]
    assert ran["placement_group"] == "none" and ran["capacity_type"] == "ON_DEMAND"
    local, lwhy = what_ran(environ={JOB_ENV[F.IMAGE]: LOCAL_IMAGE}, device={"name": "cpu", "torch": "2.14.1"},
                           nodes=2, log_texts=[], efa_installed=None)
    assert local["kernel"] == platform.release() and "local run" in lwhy["instance_type"]
    assert "CPU run" in lwhy["nccl"] and "CPU run" in lwhy["driver"]


def test_a_zone_the_cluster_copies_onto_the_pod_is_recorded_else_unknown_with_the_reason():
    group = GpuNodeGroup(name="v100", instance_type="p3.16xlarge")
    environ = job_environ(group, "repo/pytorch:2.6.0-gpu")
    ran, why = what_ran(environ={**environ, JOB_ENV[F.ZONE]: "us-west-2b"}, device=None, nodes=1, log_texts=[],
                        efa_installed=None, kernel="6.1")
    assert ran["zone"] == "us-west-2b" and "zone" not in why
    # the downward API reads a label the cluster did not copy as ""
    ran, why = what_ran(environ={**environ, JOB_ENV[F.ZONE]: ""}, device=None, nodes=1, log_texts=[],
                        efa_installed=None, kernel="6.1")
    assert ran["zone"] is None and "PodTopologyLabelsAdmission" in why["zone"]


def test_digests_and_efa_versions_are_read_only_from_their_exact_forms():
    assert image_digest(f"a/b:1@{DIGEST}") == DIGEST and image_digest("a/b:1") is None
    assert image_digest("a/b@sha256:short") is None and image_digest(None) is None
    assert efa_version(EFA_FILE) == "1.38.0" and efa_version("garbage") is None and efa_version(None) is None


def test_the_job_passes_the_groups_facts_to_the_pod():
    env = what_ran_env(P5)
    assert {JOB_ENV[k] for k in env} <= set(JOB_ENV.values())
    assert env[F.ZONE] == "us-east-1a" and env[F.CAPACITY_TYPE] == "CAPACITY_BLOCK"
    assert F.ZONE not in what_ran_env(GpuNodeGroup(name="g", instance_type="g5.xlarge"))


def test_the_launcher_writes_what_ran_into_the_summary(tmp_path):
    environ = job_environ(P5, "repo/pytorch:2.10.0-gpu")
    code = launch.main(["--results-dir", str(tmp_path), "--node-id", "node-0", "--summary", "always",
                        "--experiment", "t", "--", sys.executable, "-c", f"print({OFI_LOG.strip()!r})"],
                       environ=environ)
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    ran = summary[F.WHAT_RAN]
    assert ran["aws_ofi_nccl"] == "1.13.2" and ran["instance_type"] == "p5.48xlarge"
    assert ran["kernel"] == platform.release() and ran["torch"] is None  # no trainer ran: said, not guessed
    assert "did not report" in summary[F.WHAT_RAN_UNKNOWN]["torch"]
