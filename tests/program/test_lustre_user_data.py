"""The Lustre client install in the FSx nodes' user data, run here with a stubbed dnf and modprobe.

The script comes out of the launch templates the p5-fsx plan registers (base64 MIME, as EC2 takes
it), so what runs here is what a node would run. dnf at boot on AL2023 can fail while SSM's updates
hold the RPM lock (amazonlinux/amazon-linux-2023#397): the install retries, a bounded number of times.
"""

import base64
import email
import os
import stat
import subprocess

import pytest
import yaml

from infra.cluster.node_group import LUSTRE_CLIENT_SCRIPT, LUSTRE_INSTALL_ATTEMPTS, NODEADM_DROP_IN_DIR
from tests.program.test_aws_ready import LAUNCH_TEMPLATE, NODE_GROUP, of_type, recorded
from tests.program.test_program import P5_FILLED


@pytest.fixture(scope="module")
def fsx_regs():
    return recorded(P5_FILLED, "p5-fsx")[1]


@pytest.fixture(scope="module")
def scripts(fsx_regs):
    regs = fsx_regs
    found = []
    for t in of_type(regs, LAUNCH_TEMPLATE):
        doc = email.message_from_string(base64.b64decode(t.inputs["userData"]).decode())
        parts = [p for p in doc.walk() if p.get_content_type() == "text/x-shellscript"]
        assert len(parts) == 1, t.name
        found.append(parts[0].get_payload())
    return found


STUB = """#!/bin/bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
n=$(grep -c "^$(basename "$0") " "$STUB_LOG")
fails_var="FAIL_$(basename "$0")"
[ "$n" -gt "${!fails_var:-0}" ]
"""


def run_script(tmp_path, script, *, dnf_failures=0, modprobe_failures=0):
    """Run ``script`` with dnf, modprobe and sleep stubbed: each fails its first N calls, then succeeds."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("dnf", "modprobe", "sleep"):
        path = stubs / name
        path.write_text(STUB)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "calls.log"
    log.write_text("")
    # nodeadm's drop-in folder, here under tmp_path (the script writes /etc/eks/nodeadm.d on a node)
    (tmp_path / "user-data.sh").write_text(script.replace(NODEADM_DROP_IN_DIR, str(tmp_path / "nodeadm.d")))
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log),
           "FAIL_dnf": str(dnf_failures), "FAIL_modprobe": str(modprobe_failures)}
    r = subprocess.run(["bash", str(tmp_path / "user-data.sh")], env=env, capture_output=True, text=True,
                       timeout=60)
    return r, log.read_text().splitlines()


def test_every_fsx_node_runs_the_same_install(scripts):
    assert len(scripts) == 2  # the system group and the p5 group both mount the claim
    assert all(s.strip() == LUSTRE_CLIENT_SCRIPT.strip() for s in scripts)


def test_install_retries_a_failing_dnf_and_then_loads_the_module(scripts, tmp_path):
    r, calls = run_script(tmp_path, scripts[0], dnf_failures=2)
    assert r.returncode == 0, r.stderr
    assert calls == ["dnf install -y lustre-client", "sleep 15"] * 2 + ["dnf install -y lustre-client",
                                                                         "modprobe lustre"]
    assert "attempt 2" in r.stderr


def test_install_gives_up_after_its_attempts_and_fails_the_script(scripts, tmp_path):
    r, calls = run_script(tmp_path, scripts[0], dnf_failures=1000)
    assert r.returncode == 1
    assert calls.count("dnf install -y lustre-client") == LUSTRE_INSTALL_ATTEMPTS
    assert "modprobe lustre" not in calls
    assert f"failed {LUSTRE_INSTALL_ATTEMPTS} times (kernel " in r.stderr


def test_a_client_whose_module_does_not_load_fails_the_script(scripts, tmp_path):
    """The package installed but no module for the running kernel: say so instead of a node whose
    FSx mounts fail later with "No such device"."""
    r, calls = run_script(tmp_path, scripts[0], modprobe_failures=1)
    assert r.returncode == 1
    assert calls == ["dnf install -y lustre-client", "modprobe lustre"]
    assert "the lustre module does not load on kernel" in r.stderr


def kubelet_labels(tmp_path) -> dict[str, str]:
    """The labels the drop-ins the script left add to the kubelet's --node-labels (nodeadm appends each
    source's kubelet.flags, and the kubelet merges repeated --node-labels: nodeadm internal/api/merge.go)."""
    labels = {}
    for f in sorted((tmp_path / "nodeadm.d").glob("*.yaml")) if (tmp_path / "nodeadm.d").is_dir() else []:
        doc = yaml.safe_load(f.read_text())
        assert (doc["apiVersion"], doc["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
        for flag in doc["spec"]["kubelet"]["flags"]:
            name, _, value = flag.partition("=")
            assert name == "--node-labels", flag
            labels.update(dict(kv.split("=", 1) for kv in value.split(",")))
    return labels


def fsx_pod_selectors(regs) -> list[tuple[str, dict]]:
    """(Job, nodeSelector) of every Job whose pods mount the shared claim."""
    found = []
    for r in regs:
        if r.type != "kubernetes:batch/v1:Job":
            continue
        spec = r.inputs["spec"]["template"]["spec"]
        if any("persistentVolumeClaim" in v for v in spec.get("volumes") or []):
            found.append((r.name, spec.get("nodeSelector") or {}))
    return found


def schedulable(regs, tmp_path) -> set[str]:
    """The Jobs whose pods some node of the plan's groups takes, with the labels its user data left."""
    # the group's labels, the instance type the kubelet labels every node with, and the drop-ins' labels
    nodes = [{**(g.inputs.get("labels") or {}), "node.kubernetes.io/instance-type": (g.inputs.get("instanceTypes")
                                                                                   or ["?"])[0],
              **kubelet_labels(tmp_path)} for g in of_type(regs, NODE_GROUP)]
    return {job for job, selector in fsx_pod_selectors(regs)
            if any(selector.items() <= node.items() for node in nodes)}


def test_a_node_whose_client_installed_takes_the_fsx_pods(fsx_regs, scripts, tmp_path):
    r, _ = run_script(tmp_path, scripts[0])
    assert r.returncode == 0, r.stderr
    jobs = {job for job, _ in fsx_pod_selectors(fsx_regs)}
    assert len(jobs) >= 2 and schedulable(fsx_regs, tmp_path) == jobs  # staging and training


@pytest.mark.parametrize("failures", [{"dnf_failures": 1000}, {"modprobe_failures": 1}])
def test_a_node_whose_client_install_failed_takes_no_fsx_pod(fsx_regs, scripts, tmp_path, failures):
    """The kubelet starts whatever the script's exit status (nodeadm-run.service is only ordered after
    cloud-final): the node joins, but without the label every FSx pod selects."""
    r, _ = run_script(tmp_path, scripts[0], **failures)
    assert r.returncode == 1 and "joins without the eksbench.io/lustre-client label" in r.stderr
    assert fsx_pod_selectors(fsx_regs) and schedulable(fsx_regs, tmp_path) == set()
