"""checkov's Kubernetes checks over every Kubernetes object of the dev stack's plan.

The objects ``pulumi up`` would register (``program.offline.evaluate``) are written back as
manifests and scanned with ``checkov --framework kubernetes``. Every failed check must be in
ALLOWED (a decision, with its reason) or PENDING (fixed by wiring infra/pod_security into
the workloads' and datasets' pod builders; the test fails once an entry is no longer needed,
so the list shrinks as the wiring lands).

checkov pins boto3==1.35.49 (checkov 3.3.30's metadata) against our boto3==1.43.11, so it
cannot share the project's environment: install it into its own venv from
requirements-checkov.txt and point CHECKOV at it, or put it on PATH:

    python3 -m venv /opt/checkov && /opt/checkov/bin/pip install -r requirements-checkov.txt
    CHECKOV=/opt/checkov/bin/checkov python3 -m pytest tests/program/test_checkov.py
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.plan_manifests import write_manifests

# .ci/setup-tests installs it into .venv-checkov at the project root.
VENV_CHECKOV = Path(__file__).resolve().parents[2] / ".venv-checkov" / "bin" / "checkov"
CHECKOV = os.environ.get("CHECKOV") or shutil.which("checkov") or (str(VENV_CHECKOV) if VENV_CHECKOV.exists() else None)
pytestmark = pytest.mark.skipif(
    not CHECKOV or not os.access(CHECKOV, os.X_OK),
    reason="checkov is not installed: it conflicts with the project's boto3 pin, so it lives in its own "
           "venv (pip install -r requirements-checkov.txt there) and is found through $CHECKOV or PATH")

PLUGINS = "DaemonSet.kube-system.*"
EFA_PLUGIN = "DaemonSet.kube-system.aws-efa-k8s-device-plugin"
JOBS = "Job.eksbench.*"
GATES = "Job.eksbench.*-gate"
AUTOSTOP = "Deployment.eksbench.eksbench-autostop"
EVERYTHING = "*"

# check id -> (resource patterns it is accepted on, why). Resources read "Kind.namespace.name".
ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    "CKV_K8S_15": ((EVERYTHING,), "imagePullPolicy Always: every image is pinned to a version tag (core/catalog/pins.py); "
                                  "Always would make each pod start on 8+ nodes depend on the registry"),
    "CKV_K8S_43": ((EVERYTHING,), "image digests: tags are pinned but digests cannot be resolved without registry "
                                  "access; resolve and pin them in core/catalog/pins.py when there is (follow-up)"),
    "CKV_K8S_8": ((PLUGINS,), "liveness probe: upstream's device plugins have none; the kubelet tracks the plugin "
                              "through its registration socket"),
    "CKV_K8S_9": ((PLUGINS,), "readiness probe: as for liveness, upstream's device plugins have none"),
    "CKV_K8S_10": ((PLUGINS,), "CPU request: NVIDIA's manifest sets none (EFA's chart sets 10m and so do we)"),
    "CKV_K8S_12": ((PLUGINS,), "memory request: NVIDIA's manifest sets none (EFA's chart sets 20Mi and so do we)"),
    "CKV_K8S_11": ((PLUGINS, JOBS), "CPU limit: none upstream for the plugins; training/evaluation pods must not be "
                                    "throttled (CPU requests are set), staging and gate are short CPU-light Jobs"),
    "CKV_K8S_13": ((PLUGINS, JOBS), "memory limit: none upstream for the plugins (an OOM kill takes the node's "
                                    "GPUs/EFAs away); training/evaluation pods own their node and are sized by "
                                    "requests (staging and gate Jobs do set one)"),
    "CKV_K8S_22": ((PLUGINS,), "read-only root: not in upstream, and what the plugins write outside the hostPath "
                               "has not been checked on a node"),
    "CKV_K8S_23": ((PLUGINS,), "root: a device plugin creates its socket in the kubelet's root-owned "
                               "/var/lib/kubelet/device-plugins (upstream runs both as root)"),
    "CKV_K8S_40": ((PLUGINS,), "high UID: the plugins run as root, see CKV_K8S_23"),
    "CKV_K8S_19": ((EFA_PLUGIN,), "host network: AWS's chart runs the EFA plugin with hostNetwork: true"),
    "CKV_K8S_38": ((GATES, AUTOSTOP), "service-account token: the gate reads and resumes Jobs, and the autostop "
                                      "controller lists them, through the API server"),
}

# Checks a coming change is expected to fix, with the change (none now: the pod builders of
# workloads/ and datasets/ call infra/pod_security.harden_pod_spec).
PENDING: dict[str, tuple[tuple[str, ...], str]] = {}  # none left: every pod builder is hardened


def accepted(table: dict, check: str, resource: str) -> bool:
    patterns = table.get(check, ((), ""))[0]
    return any(fnmatch.fnmatchcase(resource, p) for p in patterns)


def scan(directory) -> dict:
    run = subprocess.run([CHECKOV, "--framework", "kubernetes", "-d", str(directory), "-o", "json", "--quiet",
                          "--compact", "--skip-download"], capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stderr[-3000:]  # 1: some check failed
    report = json.loads(run.stdout)
    return report[0] if isinstance(report, list) else report


@pytest.fixture(scope="module")
def dev_report(tmp_path_factory):
    from program.offline import evaluate

    directory = tmp_path_factory.mktemp("dev-manifests")
    assert len(write_manifests(evaluate("dev").resources, directory)) >= 15
    return scan(directory)


def test_every_failed_check_is_allowed_or_pending(dev_report):
    assert dev_report["summary"]["parsing_errors"] == 0
    failed = [(f["check_id"], f["resource"], f["check_name"]) for f in dev_report["results"]["failed_checks"]]
    unexpected = sorted({f"{c} {r}: {name}" for c, r, name in failed
                         if not accepted(ALLOWED, c, r) and not accepted(PENDING, c, r)})
    assert not unexpected, "checkov failures outside the allowlist:\n" + "\n".join(unexpected)


def test_pending_entries_are_still_needed(dev_report):
    failed = {(f["check_id"], f["resource"]) for f in dev_report["results"]["failed_checks"]}
    stale = sorted(check for check in PENDING
                   if not any(c == check and accepted(PENDING, c, r) and not accepted(ALLOWED, c, r) for c, r in failed))
    assert not stale, f"no longer failing, remove from PENDING: {stale}"


def test_etcd_and_the_network_policies_pass_everything(dev_report):
    failed = {(f["check_id"], f["resource"]) for f in dev_report["results"]["failed_checks"]}
    etcd = sorted(c for c, r in failed if r.startswith(("Deployment.eksbench.etcd", "Service.eksbench.etcd")))
    assert set(etcd) <= {"CKV_K8S_15", "CKV_K8S_43"}, etcd
    assert not [c for c, _ in failed if c == "CKV2_K8S_6"]  # every pod has a NetworkPolicy


def test_allowlist_reasons_are_given():
    for table in (ALLOWED, PENDING):
        for check, (patterns, why) in table.items():
            assert check.startswith(("CKV_K8S_", "CKV2_K8S_")) and patterns and len(why) > 20, check
