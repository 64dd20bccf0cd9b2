"""A reader that stops early (``eksbench status | head -1``) ends an output command quietly, exit 0, as ``head``
users expect: no ``BrokenPipeError`` traceback, and no complaint from the interpreter's last flush either."""

from __future__ import annotations

import contextlib
import io
import sys
import threading

import pytest

from tests.bench.conftest import ROOT, summary, write_experiment
from tests.support.closed_output import closed_pipe, run_into_closed_pipe


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results root with two local runs of dev, so status has rows to print."""
    root = tmp_path_factory.mktemp("closed") / "results"
    for run in ("r1", "r2"):
        write_experiment(root, f"dev/{run}/resnet50-synthetic", summary("resnet50-synthetic"))
    return root


def commands(results) -> dict[str, list[str]]:
    page = str(results.parent / "report.html")
    return {"status": ["status", "dev", "--results-root", str(results)],
            "status --json": ["status", "dev", "--json", "--results-root", str(results)],
            "plan": ["plan", "dev"], "plan --json": ["plan", "dev", "--json"],
            "report": ["report", str(results / "dev"), "--out", page],
            "compare": ["compare", str(results / "dev" / "r1"), str(results / "dev" / "r2")]}


@pytest.mark.parametrize("name", ["status", "status --json", "plan", "plan --json", "report", "compare"])
def test_an_output_command_into_a_closed_pipe_exits_0_quietly(results, name):
    """Before: each ended with a BrokenPipeError traceback, exit 1 (compare: "compare failed", exit 3)."""
    done = run_into_closed_pipe([sys.executable, "-m", "bench", *commands(results)[name]], cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_stdout_and_stderr_into_one_closed_pipe_exit_0(results):
    """``2>&1 | head -1``: stderr is the same closed pipe, so a warning or the exit cannot complain there either."""
    done = run_into_closed_pipe([sys.executable, "-m", "bench", *commands(results)["status"]], stderr_too=True,
                                cwd=ROOT, timeout=120)
    assert done.returncode == 0


def test_several_stacks_keep_draining_their_children_when_the_reader_goes_away():
    """``bench run a b | head``: the lines of each stack's child go nowhere once the reader is gone, but they are
    still read, so no child blocks on a full pipe. Before: the pump's thread died on BrokenPipeError."""
    from bench.commands.multi import _pump

    lines = "".join(f"step {i}\n" for i in range(10_000))  # more than a pipe holds (64 KiB)
    with closed_pipe() as fd:
        out = open(fd, "w", closefd=False)
        child = io.StringIO(lines)
        failed: list[BaseException] = []
        pump = threading.Thread(target=lambda: _guard(failed, _pump, child, "dev", out, threading.Lock()))
        pump.start()
        pump.join(timeout=30)
        with contextlib.suppress(BrokenPipeError):  # what is left in its buffer has nowhere to go
            out.close()
    assert not pump.is_alive() and failed == []
    assert child.closed  # read to the end


def _guard(failed: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - the thread's failure, handed to the test
        failed.append(e)
