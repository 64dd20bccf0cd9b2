"""``eksbench run <stack>`` (AWS), ``up`` and ``destroy`` show what they create or delete and its cost an hour, then
ask ``Proceed? [y/N]``: asked on a real pseudo-terminal, answered by ``--yes``, refused without a terminal.

No Pulumi CLI is on the children's PATH, so a yes stops at the first step after the question (the CLI check) and a
no or end of input before it: what each answer reaches is what the test reads."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest

from tests.bench.conftest import ROOT

QUESTION = "Proceed? [y/N] "
PROMPT = QUESTION.encode()
CLI_MISSING = "error: the Pulumi CLI is not on PATH"


def cli(tmp_path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bench", *args, "--project-dir", str(ROOT)]


def env_without_pulumi(tmp_path) -> dict[str, str]:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {**os.environ, "PATH": str(empty), "PYTHONPATH": str(ROOT), "EKSBENCH_NO_COLOR": "1"}


def converse(argv: list[str], answer: bytes | None, env: dict[str, str], timeout: float = 180) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal (stdin, stdout and stderr), type ``answer`` once the question shows
    (None: answer nothing); its exit code and everything it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, start_new_session=True)
    os.close(slave)
    out, asked, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the terminal's other end closed it
                break
            if not chunk:
                break
            out += chunk
            if not asked and answer is not None and PROMPT in out:
                os.write(master, answer)
                asked = True
        else:
            proc.kill()
            pytest.fail(f"{argv} did not end in {timeout} s:\n{out.decode(errors='replace')}")
        return proc.wait(timeout=30), out.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()


def test_run_on_a_terminal_shows_the_cost_asks_and_a_yes_goes_on(tmp_path):
    code, out = converse(cli(tmp_path, "run", "dev", "--results-root", str(tmp_path / "r")), b"y\n",
                         env_without_pulumi(tmp_path))
    head, _, after = out.partition(QUESTION)
    assert "eksbench run dev creates 80 resources in us-west-2" in head, out
    assert "gpu nodes p3 (2x p3.16xlarge)" in head and "$49.30/hour on demand while up" in head
    assert CLI_MISSING in after and code == 2, out  # the step after the question was reached


@pytest.mark.parametrize("answer", [b"n\n", b"\x04"], ids=["n", "eof"])  # the other answers: test_ask_...
def test_run_on_a_terminal_does_nothing_unless_the_answer_is_yes(tmp_path, answer):
    code, out = converse(cli(tmp_path, "run", "dev", "--results-root", str(tmp_path / "r")), answer,
                         env_without_pulumi(tmp_path))
    assert QUESTION in out and "eksbench run dev not confirmed: nothing was done" in out, out
    assert CLI_MISSING not in out and code == 2
    assert not (tmp_path / "r").exists()


def test_run_with_yes_shows_the_cost_and_goes_on_without_a_question(tmp_path):
    for flag in ("--yes", "-y"):
        done = subprocess.run(cli(tmp_path, "run", "dev", flag, "--results-root", str(tmp_path / "r")),
                              env=env_without_pulumi(tmp_path), cwd=ROOT, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=180)
        assert "$49.30/hour on demand while up" in done.stdout and f"{QUESTION}yes (--yes)" in done.stdout
        assert done.returncode == 2 and done.stderr.startswith(CLI_MISSING), done.stdout + done.stderr


@pytest.mark.parametrize("args", [("run", "dev"), ("destroy", "dev"), ("up", "dev")])
def test_without_a_terminal_or_yes_the_command_refuses_in_one_line_before_the_plan(tmp_path, args):
    started = time.monotonic()
    done = subprocess.run(cli(tmp_path, *args), env=env_without_pulumi(tmp_path), cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert done.stderr == (f"error: eksbench {' '.join(args)} asks before it creates or deletes resources on AWS, "
                           "and stdin is not a terminal: pass --yes to proceed without the question (`eksbench plan "
                           "STACK` shows what a stack creates and costs)\n")
    assert time.monotonic() - started < 30  # no plan was evaluated


def test_max_cost_still_refuses_before_the_question(tmp_path):
    done = subprocess.run(cli(tmp_path, "run", "dev", "--yes", "--max-cost", "1"), env=env_without_pulumi(tmp_path),
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2 and "above --max-cost $1.00" in done.stderr
    assert QUESTION not in done.stdout


@pytest.mark.parametrize("answer,reached", [(b"y\n", CLI_MISSING), (b"n\n", "not confirmed: nothing was done")])
def test_destroy_on_a_terminal_shows_what_it_deletes_and_asks(tmp_path, answer, reached):
    code, out = converse(cli(tmp_path, "destroy", "dev"), answer, env_without_pulumi(tmp_path))
    head, _, after = out.partition(QUESTION)
    assert "eksbench destroy dev deletes the stack's resources, 80 resources in us-west-2" in head, out
    assert "$49.30/hour on demand while up" in head
    assert reached in after and code == 2, out


def test_several_stacks_on_aws_need_yes(tmp_path):
    done = subprocess.run(cli(tmp_path, "run", "dev", "fabric"), env=env_without_pulumi(tmp_path), cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "several stacks on AWS (dev, fabric)" in done.stderr and "--yes" in done.stderr


def test_yes_is_refused_for_a_local_run(tmp_path):
    done = subprocess.run(cli(tmp_path, "run", "dev", "--local", "--yes"), cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env_without_pulumi(tmp_path))
    assert done.returncode == 2 and "--yes: only for AWS runs" in done.stderr


# --- the pieces, without a process ---

def confirm():
    from bench.cloud import confirm as module

    return module


def test_ask_takes_only_y_or_yes_and_treats_the_end_of_input_as_no():
    ask = confirm().ask

    def read(answer):
        def reader(prompt):
            assert prompt == QUESTION
            if isinstance(answer, BaseException):
                raise answer
            return answer
        return reader

    shown: list[str] = []
    assert ask(["a"], yes=False, read=read(" Y "), write=shown.append) and shown == ["a"]
    assert ask([], yes=False, read=read("yes"), write=shown.append)
    for answer in ("", "n", "no", "yep", EOFError(), NotImplementedError()):
        assert not ask([], yes=False, read=read(answer), write=shown.append)
    assert ask(["b"], yes=True, read=read(AssertionError("asked")), write=shown.append)
    assert shown[-2:] == ["b", f"{QUESTION}yes (--yes)"]


def test_terminal_problem_only_without_a_terminal_and_without_yes():
    terminal_problem = confirm().terminal_problem

    assert terminal_problem("run dev", yes=True, interactive=False) is None
    assert terminal_problem("run dev", yes=False, interactive=True) is None
    assert "pass --yes" in terminal_problem("run dev", yes=False, interactive=False)


def test_a_stack_file_that_does_not_evaluate_still_gets_a_destroy_question(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  aws:region: us-west-2\n  eksbench:storage: {kind: nfs}\n")
    plan, why = confirm().destroy_plan("x", tmp_path)
    assert plan is None and why.startswith("Pulumi.x.yaml does not validate: ") and 'storage.kind="nfs"' in why
    (line,) = confirm().change_lines("destroy", "x", plan, why_unknown=why)
    assert "not known offline" in line and "destroy acts on whatever the stack holds" in line
