"""An AWS set-up that is half done, against the fake Pulumi CLI and moto: an AWS_PROFILE that names no profile (or
is set empty) and credentials past their time. ``run``, ``status --cloud`` and ``logs`` need AWS: each says in one
line what to do (the profile's name, ``aws configure --profile``, ``unset AWS_PROFILE``, ``aws sso login``), exit 2,
never a traceback, and nothing is built."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.cloud import preflight
from tests.lifecycle.conftest import REGION, ROOT

pytestmark = pytest.mark.local_run


def profiled(project, tmp_path, profile: str) -> dict[str, str]:
    """The project's environment, its AWS config files empty, AWS_PROFILE ``profile``."""
    (tmp_path / "aws-config").write_text("")
    return {**project.env(), "AWS_PROFILE": profile, "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-config")}


def eksbench(project, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args, "--project-dir", str(project.dir), "--results-root",
                           str(project.results)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


LOGS_LEAD = "error: no logs for lc/alpha: not in the cluster; S3 (s3://lc-results/eksbench/lc/r1/alpha/) not readable: "


@pytest.mark.parametrize("args,lead", [(("run", "lc", "--yes"), "error: run lc: "),
                                       (("status", "lc", "--cloud"), "error: status lc: "),
                                       (("logs", "lc", "alpha"), LOGS_LEAD)], ids=["run", "status", "logs"])
def test_a_profile_that_is_not_there_is_one_line_naming_it(project, tmp_path, args, lead):
    project.write_stack()
    line = one_line(eksbench(project, profiled(project, tmp_path, "nope"), *args))
    assert line.startswith(lead + "the AWS profile 'nope' (AWS_PROFILE)"), line
    assert "aws configure --profile nope" in line and "unset AWS_PROFILE" in line, line
    assert not any(c[:1] == ["up"] for c in project.commands())


def test_without_a_profile_status_and_logs_still_show_what_is_here(project, tmp_path):
    """AWS not asked by name: status notes the fix and shows the local runs; logs finds a local run's logs."""
    project.write_stack()
    (project.dir / ".eksbench" / "work" / "lc").mkdir(parents=True)  # the stack has been on AWS from here
    logs = project.results / "lc" / "20260101-000000" / "alpha" / "logs"
    logs.mkdir(parents=True)
    (logs / "node-0.log").write_text("[workloads.train] rank 0/1\n")
    env = profiled(project, tmp_path, "nope")
    status = eksbench(project, env, "status", "lc")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert "status lc: the AWS profile 'nope' (AWS_PROFILE)" in status.stdout and "alpha" in status.stdout
    shown = eksbench(project, env, "logs", "lc", "alpha")
    assert shown.returncode == 0 and "rank 0/1" in shown.stdout, shown.stderr


@pytest.mark.parametrize("args", [("run", "lc", "--yes"), ("status", "lc", "--cloud")], ids=["run", "status"])
def test_an_empty_aws_profile_is_one_line(project, tmp_path, args):
    project.write_stack()
    line = one_line(eksbench(project, profiled(project, tmp_path, ""), *args))
    assert "AWS_PROFILE is set but empty: unset AWS_PROFILE" in line, line


@pytest.mark.parametrize("error,words", [
    ({"Error": {"Code": "ExpiredToken", "Message": "The security token included in the request is expired"}},
     "the AWS credentials have expired (ExpiredToken): refresh them (aws sso login"),
    ({"Error": {"Code": "RequestExpired", "Message": "Request has expired."}}, "check this machine's clock"),
    ("sso", "the AWS SSO session has expired or was never started: run aws sso login --profile bench")])
def test_credentials_past_their_time_name_how_to_refresh_them(monkeypatch, error, words):
    import boto3
    from botocore.exceptions import ClientError, TokenRetrievalError

    class Sts:
        def get_caller_identity(self):
            if error == "sso":
                raise TokenRetrievalError(provider="sso", error_msg="Token has expired and refresh failed")
            raise ClientError(error, "GetCallerIdentity")

    monkeypatch.setenv("AWS_PROFILE", "bench")
    monkeypatch.setattr(boto3, "client", lambda *_a, **_k: Sts())
    with pytest.raises(preflight.Refusal) as refused:
        preflight.check_credentials(REGION, "run lc")
    assert str(refused.value).startswith("run lc: ") and words in str(refused.value), refused.value
