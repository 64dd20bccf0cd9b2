"""A set-up that is half done, as a new user has it: an AWS profile that is not there (or AWS_PROFILE set empty),
credentials past their time, an environment made by hand without one of the CLI's own packages. The offline
commands need none of it; the others say in one line what to do, exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from program.stack_files import ROOT


def bench(*args: str, env: dict[str, str] | None = None, pre: str = "") -> subprocess.CompletedProcess:
    """``python -m bench ARGS``, after ``pre`` (Python run first, in the same process) where one is given."""
    code = f"{pre}\nimport sys\nsys.argv = ['eksbench', *{list(args)!r}]\nfrom bench.cli import main\n" \
           "raise SystemExit(main())"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env=env)


def no_profiles(tmp_path, profile: str) -> dict[str, str]:
    """An environment whose AWS config files are empty and whose AWS_PROFILE is ``profile``."""
    (tmp_path / "config").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_PROFILE": profile, "AWS_CONFIG_FILE": str(tmp_path / "config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "config"), "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.mark.parametrize("profile", ["nope", ""])
def test_the_offline_plan_needs_no_aws_profile(tmp_path, profile):
    """botocore's endpoint data is read without a session: a session resolves the profile first."""
    done = bench("plan", "dev", env=no_profiles(tmp_path, profile))
    assert done.returncode == 0, done.stderr
    assert "Estimated cost:" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("args,lead", [(["audit", "dev"], "audit dev"),
                                       (["data", "verify", "s3://eksbench-no-such-bucket/datasets/x/"],
                                        "read s3://eksbench-no-such-bucket/datasets/x/")], ids=["audit", "data"])
def test_the_other_aws_commands_name_the_profile_that_is_not_there(tmp_path, args, lead):
    done = bench(*args, env=no_profiles(tmp_path, "nope"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: {lead}: the AWS profile 'nope' (AWS_PROFILE)"), lines
    assert "aws configure --profile nope" in lines[0], lines


@pytest.mark.parametrize("args", [["report", "s3://eksbench-no-such-bucket/eksbench/dev"],
                                  ["compare", "s3://eksbench-no-such-bucket/a", "s3://eksbench-no-such-bucket/b"],
                                  ["prices", "refresh", "--out", "PRICES"]], ids=["report", "compare", "prices"])
def test_the_results_and_price_readers_name_the_profile_that_is_not_there(tmp_path, args):
    """report and compare of s3:// results failed in boto3.client with ProfileNotFound (a traceback)."""
    args = [str(tmp_path / "p.py") if a == "PRICES" else a for a in args]
    done = bench(*args, env=no_profiles(tmp_path, "nope"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the AWS profile 'nope' (AWS_PROFILE)" in lines[0] and "aws configure --profile nope" in lines[0], lines
    assert not (tmp_path / "p.py").exists()


@pytest.mark.parametrize("missing", ["rich", "yaml"])
def test_the_clis_own_imports_are_checked_as_a_commands_are(missing):
    """``--version`` (and every command) imports the commands' modules first: a package they need at import time
    and the environment lacks is the same one line naming the install that brings it."""
    done = bench("--version", pre=f"import sys; sys.modules[{missing!r}] = None")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: the Python package "), done.stderr
    assert f"({missing})" in lines[0] and "bash .ci/setup" in lines[0], lines


def test_credentials_problems_name_the_fix():
    from botocore.exceptions import (
        ClientError,
        NoCredentialsError,
        ProfileNotFound,
        SSOTokenLoadError,
        TokenRetrievalError,
        UnauthorizedSSOTokenError,
    )

    from core.catalog.aws import credentials_problem, no_credentials

    assert credentials_problem(NoCredentialsError(), "run dev") == no_credentials("run dev")
    line = credentials_problem(ProfileNotFound(profile="nope"), "run dev")
    assert line.startswith("run dev: the AWS profile 'nope' (AWS_PROFILE)") and "aws configure --profile nope" in line
    assert "unset AWS_PROFILE" in credentials_problem(ProfileNotFound(profile=""), "run dev")
    for sso in (TokenRetrievalError(provider="sso", error_msg="x"), SSOTokenLoadError(error_msg="x"),
                UnauthorizedSSOTokenError()):
        assert "aws sso login" in credentials_problem(sso, "status dev"), sso
    for code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
        line = credentials_problem(ClientError({"Error": {"Code": code}}, "GetCallerIdentity"), "run dev")
        assert line.startswith(f"run dev: the AWS credentials have expired ({code})") and "aws sso login" in line
    try:
        try:
            raise ProfileNotFound(profile="nope")
        except ProfileNotFound as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert "'nope'" in credentials_problem(wrapped, "logs dev")
    assert credentials_problem(ClientError({"Error": {"Code": "AccessDenied"}}, "ListObjectsV2"), "x") is None
    assert credentials_problem(ValueError("x"), "x") is None
    assert "\n" not in credentials_problem(ProfileNotFound(profile="a\nb" * 100), "x")  # quoted, shortened
