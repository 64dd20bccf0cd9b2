"""The Pulumi CLI installed but not ready, as a new user meets it: never logged in, a self-managed backend without
its passphrase, a stack the backend does not have. ``eksbench up|preview|destroy|outputs`` say so in one line naming
the fix, exit 2; ``bench.automation`` raises AutomationError whose ``str()`` is that line. No traceback.

The ``pulumi`` here is a shell script that answers ``version`` (the Automation API asks it first) and to anything
else prints the real CLI's message to stderr and exits 255, as pulumi 3.272 does. The messages are the CLI's own
(github.com/pulumi/pulumi: pkg/backend/backenderr/backenderr.go, pkg/secrets/passphrase/manager.go)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_LOGGED_IN = "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions"
NO_PASSPHRASE = ("error: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE "
                 "environment variables")
LAPSED = "error: this command requires logging in; try running `pulumi login` first"
NO_STACK = "error: no stack named 'dev' found"


def fake_pulumi(folder: Path, message: str) -> Path:
    """``folder/pulumi``: v3.272.0 to ``version``, else ``message`` on stderr and exit 255."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "pulumi"
    quoted = message.replace("'", "'\"'\"'")
    exe.write_text(f"#!/bin/sh\nif [ \"$1\" = version ]; then echo v3.272.0; exit 0; fi\n"
                   f"printf '%s\\n' '{quoted}' >&2\nexit 255\n")
    exe.chmod(0o755)
    return folder


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder: Pulumi.yaml and the dev stack, as the repository has them."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, folder / name)
    return folder


def environment(tmp_path: Path, message: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env["PATH"] = f"{fake_pulumi(tmp_path / 'bin', message)}{os.pathsep}{env.get('PATH', '')}"
    return env


def eksbench(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args, "--project-dir", str(project)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def one_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.mark.parametrize("verb", ["up", "preview", "destroy", "outputs"])
def test_a_cli_never_logged_in_is_one_line_naming_pulumi_login(tmp_path, project, verb):
    args = [verb, "dev", *(["--yes"] if verb in ("up", "destroy") else [])]
    line = one_line(eksbench(project, environment(tmp_path, NOT_LOGGED_IN), *args))
    assert "not logged in" in line and "`pulumi login`" in line and "`pulumi login --local`" in line, line
    assert "PULUMI_ACCESS_TOKEN" in line, line


# pkg/secrets/passphrase/manager.go, errorCrypter.DecryptValue: a passphrase given, but not the stack's
WRONG_PASSPHRASE = ("error: failed to decrypt: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the correct "
                    "passphrase or set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase")


@pytest.mark.parametrize("message,words", [(NO_PASSPHRASE, "set PULUMI_CONFIG_PASSPHRASE"),
                                           (WRONG_PASSPHRASE, "do not open with this passphrase"),
                                           (LAPSED, "`pulumi login`"),
                                           (NO_STACK, "`eksbench up dev` builds it")])
def test_the_other_first_failures_name_their_fix(tmp_path, project, message, words):
    line = one_line(eksbench(project, environment(tmp_path, message), "outputs", "dev"))
    assert words in line, line


@pytest.mark.parametrize("call", ["up", "preview", "destroy", "outputs"])
def test_automation_raises_the_same_one_line(tmp_path, project, monkeypatch, call):
    from bench import automation

    monkeypatch.setenv("PATH", environment(tmp_path, NOT_LOGGED_IN)["PATH"])
    for name in [k for k in os.environ if k.startswith("PULUMI_")]:
        monkeypatch.delenv(name)
    kwargs = {"yes": True} if call in ("up", "destroy") else {}
    with pytest.raises(automation.AutomationError) as caught:
        getattr(automation, call)("dev", project, **({"on_output": None} if call != "outputs" else {}), **kwargs)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("the Pulumi CLI is not logged in to a backend: run `pulumi login`")
    done = eksbench(project, environment(tmp_path / "cli", NOT_LOGGED_IN), "outputs", "dev")
    assert one_line(done) == f"error: {line}"  # the command line prints the same line


def test_any_other_failure_of_the_cli_is_left_as_it_came(tmp_path, project, monkeypatch):
    from pulumi.automation import errors

    from bench import automation

    monkeypatch.setenv("PATH", environment(tmp_path, "error: something else entirely")["PATH"])
    with pytest.raises(errors.CommandError):
        automation.outputs("dev", project)
