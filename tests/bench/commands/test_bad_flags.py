"""`eksbench run` and the commands that reach AWS as a user mistypes them or has no credentials: each bad flag,
unusable --results-root or missing credential is one line naming it (and how to give credentials), exit 2, no
traceback, and nothing created or started."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser, main
from core.catalog.aws import CREDENTIALS_HOWTO, credentials_problem, no_credentials
from program.stack_files import ROOT


def run_cli(capsys, *argv: str) -> tuple[int, list[str]]:
    """The exit code and the non-empty stderr lines of ``eksbench <argv>``, in this process."""
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def no_aws_env() -> dict[str, str]:
    """This environment without any AWS credential source: no AWS_* variables, no files, no instance metadata."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true"}


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


# --- numbers: each is a positive, finite number (a deadline of -5 once marked both experiments "not run") ---

@pytest.mark.parametrize("flag, unit, example", [("--deadline", "minutes", "90"), ("--max-cost", "US dollars", "150"),
                                                 ("--poll", "seconds", "15"), ("--progress-every", "seconds", "10")])
@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "-inf", "abc"])
def test_a_number_flag_refuses_what_is_not_a_positive_finite_number(capsys, flag, unit, example, value):
    code, lines = run_cli(capsys, "run", "dev", "--local", "--dry-run", f"{flag}={value}")
    assert code == 2, lines
    assert lines[-1] == (f"eksbench run: error: argument {flag}: {value!r}: must be a positive number of {unit}, "
                         f"e.g. {flag} {example}"), lines
    assert not any("Traceback" in line for line in lines)


def test_a_positive_number_is_taken(capsys):
    args = build_parser().parse_args(["run", "dev", "--deadline", "1.5", "--poll=2", "--max-cost", "0.01"])
    assert (args.deadline, args.poll, args.max_cost) == (1.5, 2.0, 0.01)


# --- flags of the other kind of run: refused, once, before anything starts ---

KEEP = ("error: --keep: only for AWS runs (it keeps the cluster with its GPU groups at zero); drop it or run "
        "without --local")


@pytest.mark.parametrize("extra, line", [
    (["--keep"], KEEP),
    (["--max-cost", "5"], "error: --max-cost: only for AWS runs (it caps the AWS run's estimated and spent cost); "
                          "drop it or run without --local"),
    (["--poll", "5"], "error: --poll: only for AWS runs (it sets how often the cluster's results are checked); "
                      "drop it or run without --local"),
])
def test_aws_only_flags_are_refused_with_local(capsys, extra, line):
    code, lines = run_cli(capsys, "run", "dev", "--local", "--dry-run", *extra)
    assert (code, lines) == (2, [line])


def test_local_only_flags_are_refused_on_aws_each_in_one_line(capsys):
    code, lines = run_cli(capsys, "run", "dev", "--experiment", "cifar10-elastic", "--dry-run")
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: --dry-run: only for --local runs (for AWS, eksbench plan STACK shows")


def test_an_aws_run_id_other_than_the_stacks_is_refused_quoting_it(capsys):
    code, lines = run_cli(capsys, "run", "dev", "--run-id", "try 2")
    assert (code, lines) == (2, ["error: --run-id='try 2': on AWS the run id is the stack's eksbench:run_id (run-001); "
                                 "set it in Pulumi.dev.yaml"])


def test_several_stacks_are_refused_once_not_once_per_stack(capsys):
    code, lines = run_cli(capsys, "run", "dev", "fabric", "--local", "--dry-run", "--keep")
    assert (code, lines) == (2, [KEEP])


def test_every_flag_reaches_each_stacks_child_as_given(tmp_path):
    """A several-stack run starts one `eksbench run <stack>` per stack: its child parses to the very same flags."""
    from bench.commands.multi import child_argv

    parser = build_parser()
    given = ["run", "dev", "fabric", "--local", "--experiment", "e", "--run-id", "try-2", "--resume",
             "--progress-every", "5", "--deadline", "9.5", "--results-root", str(tmp_path), "--project-dir", str(ROOT),
             "--dry-run", "--set", "local.steps=5", "--set", "experiments[0].nodes=1"]
    args = parser.parse_args(given)
    argv = child_argv(args, "fabric")
    assert argv[:5] == [sys.executable, "-m", "bench", "run", "fabric"]
    child = parser.parse_args(argv[3:])
    assert {**vars(child), "stacks": args.stacks} == vars(args)
    aws = parser.parse_args(["run", "dev", "fabric", "--keep", "--max-cost", "150", "--poll", "20", "--yes"])
    assert {**vars(parser.parse_args(child_argv(aws, "dev")[3:])), "stacks": aws.stacks} == vars(aws)


# --- --results-root that cannot hold results: one line, before anything is made ---

def unusable_roots(tmp_path: Path) -> dict[str, str]:
    """Paths no run can write under, for root too (tests run as root: permissions do not stop it)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {"/proc/eksbench-results": "/proc does not allow new folders",
            str(a_file): "it is not a folder",
            str(a_file / "results"): f"{a_file} is not a folder"}


@pytest.mark.parametrize("mode", [["--local"], ["--local", "--dry-run"], []], ids=["local", "dry-run", "aws"])
def test_an_unusable_results_root_is_one_line_and_exit_2(capsys, tmp_path, mode):
    for root, why in unusable_roots(tmp_path).items():
        code, lines = run_cli(capsys, "run", "dev", *mode, "--results-root", root)
        assert code == 2 and len(lines) == 1, lines
        assert lines[0].startswith(f"error: --results-root={root!r}: {why}") and \
            lines[0].endswith(", choose another folder"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing made, no probe left behind


def test_the_aws_run_refuses_an_unusable_results_root_before_its_preflight(tmp_path, monkeypatch):
    """The API's cloud run (``eksbench run`` without --local, notebooks) checks where results come home first."""
    import bench.cloud.preflight
    from bench.cloud.run import CloudRunOptions, run_stack

    def preflight(*args, **kwargs):
        raise AssertionError("the preflight ran: the cluster would have been built before the results root was checked")

    monkeypatch.setattr(bench.cloud.preflight, "preflight", preflight)
    (tmp_path / "a-file").write_text("")
    outcome = run_stack("dev", CloudRunOptions(root=ROOT, results_root=tmp_path / "a-file" / "results"))
    assert outcome.code == 2
    assert outcome.refusal == (f"--results-root={str(tmp_path / 'a-file' / 'results')!r}: {tmp_path / 'a-file'} is "
                               "not a folder, choose another folder")


def test_a_usable_results_root_leaves_nothing_behind(tmp_path):
    from bench.project import results_root_problem

    assert results_root_problem(tmp_path / "new" / "deeper") is None
    assert results_root_problem(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_an_out_file_is_checked_before_the_work_and_a_usable_one_leaves_nothing_behind(tmp_path, monkeypatch):
    import errno
    import tempfile

    from bench.project import out_file_problem

    (tmp_path / "page.html").write_text("old")
    (tmp_path / "link.html").symlink_to(tmp_path / "page.html")
    for usable in (tmp_path / "new.html", tmp_path / "page.html", tmp_path / "link.html"):
        assert out_file_problem(usable) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "page.html"]
    assert out_file_problem(tmp_path) == (f"--out={str(tmp_path)!r}: is a folder; name a file, e.g. "
                                          f"--out {tmp_path / 'report.html'}")

    def refuse(**kwargs):  # what a folder this user cannot write answers (root passes every permission check)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    assert out_file_problem(tmp_path / "r.html") == (f"--out={str(tmp_path / 'r.html')!r}: {tmp_path} is not "
                                                     "writable for this user, choose another place")


# --- no AWS credentials: one line saying how to provide them, in every command that reaches AWS ---

def test_no_credentials_is_told_by_botocores_own_exceptions():
    from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

    def is_no_credentials(error: BaseException) -> bool:
        return credentials_problem(error, "w") == no_credentials("w")

    assert is_no_credentials(NoCredentialsError())
    assert is_no_credentials(PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"))
    try:
        try:
            raise NoCredentialsError()
        except NoCredentialsError as e:
            raise RuntimeError("listing failed") from e
    except RuntimeError as wrapped:
        assert is_no_credentials(wrapped)
    assert not is_no_credentials(ClientError({"Error": {"Code": "AccessDenied"}}, "ListObjectsV2"))
    assert not is_no_credentials(ValueError("x"))


def test_audit_without_credentials_is_one_line_saying_how_to_provide_them():
    done = bench("audit", "dev", env=no_aws_env())
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["error: " + no_credentials("audit dev")], done.stderr
    assert "set AWS_PROFILE (after aws sso login or aws configure), or export an access key pair" in done.stderr


def test_the_audit_after_a_destroy_without_credentials_says_how_to_provide_them(monkeypatch):
    import bench.cloud.audit as a
    from botocore.exceptions import NoCredentialsError

    def no_keys(*args, **kwargs):
        raise NoCredentialsError()

    monkeypatch.setattr(a, "audit", no_keys)
    lines = []
    assert a.audit_after_destroy("dev", out=lines.append) is True  # the destroy itself succeeded
    assert lines == [no_credentials("audit dev") + "; run it later: eksbench audit dev"]


@pytest.mark.parametrize("args", [["report", "s3://eksbench-no-such-bucket/dev"],
                                  ["compare", "s3://eksbench-no-such-bucket/a", "s3://eksbench-no-such-bucket/b"],
                                  ["data", "verify", "s3://eksbench-no-such-bucket/datasets/x/"]],
                         ids=["report", "compare", "data"])
def test_s3_commands_without_credentials_say_how_to_provide_them_in_one_line(args, tmp_path):
    out = ["--out", str(tmp_path / "r.html")] if args[0] == "report" else []
    done = bench(*args, *out, env=no_aws_env())
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and f"no AWS credentials found: {CREDENTIALS_HOWTO}" in lines[0], lines
    assert "NoCredentialsError" not in done.stderr and "Traceback" not in done.stderr


def test_the_type_function_names_its_unit_in_argparses_messages():
    from bench.commands.run import positive

    with pytest.raises(argparse.ArgumentTypeError, match=r"'0': must be a positive number of minutes, e.g. --deadline 9"):
        positive("minutes", "--deadline 9")("0")
