"""Real-engine checks: `pulumi preview` against AWS. They need the Pulumi CLI, its plugins
and AWS credentials, none of which exist on our build machines, so they skip with the reason.
"""

import os
import shutil
import subprocess

import pytest

from program.stack_files import ROOT

pytestmark = pytest.mark.cloud


def _missing() -> str:
    if shutil.which("pulumi") is None:
        return "the Pulumi CLI is not on PATH (install it from pulumi.com to run real previews)"
    if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")
            or os.path.exists(os.path.expanduser("~/.aws/credentials"))):
        return "no AWS credentials (set AWS_PROFILE or AWS_ACCESS_KEY_ID)"
    if shutil.which("aws") is None:
        return "the AWS CLI is not on PATH (the generated kubeconfig runs `aws eks get-token`)"
    return ""


@pytest.mark.skipif(bool(_missing()), reason=_missing() or "ready")
def test_pulumi_preview_of_the_dev_stack(tmp_path):
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}",
           "PULUMI_CONFIG_PASSPHRASE": os.environ.get("PULUMI_CONFIG_PASSPHRASE", "eksbench-preview")}
    subprocess.run(["pulumi", "stack", "select", "--create", "dev"], cwd=ROOT, env=env, check=True)
    r = subprocess.run(["pulumi", "preview", "--stack", "dev", "--non-interactive", "--diff"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "eks:index:Cluster" in r.stdout
