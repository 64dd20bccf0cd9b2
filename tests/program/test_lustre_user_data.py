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

from infra.cluster.node_group import LUSTRE_CLIENT_SCRIPT, LUSTRE_INSTALL_ATTEMPTS
from tests.program.test_aws_ready import LAUNCH_TEMPLATE, of_type, recorded
from tests.program.test_program import P5_FILLED


@pytest.fixture(scope="module")
def scripts():
    regs = recorded(P5_FILLED, "p5-fsx")[1]
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
    (tmp_path / "user-data.sh").write_text(script)
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
