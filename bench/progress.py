"""The command line's progress lines, through one library: rich.

Everything the run prints while it works (experiment progress, ``pulumi up`` resource
groups, teardown) goes through ``line``. Off a terminal (CI logs, tests, pipes) rich writes the
text exactly as given: no colour, no wrapping, no markup parsing, so log lines stay greppable
and the local run prints what it always printed. On a terminal ``live`` keeps one line per
experiment in place instead of scrolling. The console resolves ``sys.stdout`` at each write,
so redirected streams (pytest's capsys, notebooks) are honoured.

A reader that goes away (``eksbench run dev --local | head -3``, a closed ssh pipe) stops the output, never the
command: ``reader_gone`` points the closed stream at /dev/null (Python's own recipe for SIGPIPE,
https://docs.python.org/3/library/signal.html#note-on-sigpipe) and keeps the time for the run's record
(``closed_note``). Rich's own answer to a broken pipe is ``SystemExit(1)`` (``Console.on_broken_pipe``), which
would stop a run half-way and tear it down; our consoles answer with ``reader_gone`` instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from typing import Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

from bench.terminal import safe

_closed_at: list[float] = []  # when a reader of stdout or stderr was first found gone


def _reader_closed(fd: int) -> bool:
    """The write end ``fd`` of a pipe or socket whose reader has gone (poll(2) reports POLLERR, or POLLHUP for a
    socket); False for a file or a terminal, and for a descriptor that is not open."""
    try:
        poller = select.poll()
        poller.register(fd, 0)  # no events asked for: POLLERR and POLLHUP are always reported
        return any(mask & (select.POLLERR | select.POLLHUP) and not mask & select.POLLNVAL
                   for _, mask in poller.poll(0))
    except (OSError, ValueError):
        return False


def reader_gone() -> bool:
    """Point stdout and stderr, whichever's reader has gone, at /dev/null, so that every later write (and the
    interpreter's last flush) succeeds and goes nowhere; True when one had. The first time is kept."""
    gone = [fd for fd in (1, 2) if _reader_closed(fd)]
    if not gone:
        return False
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in gone:
            os.dup2(null, fd)
    finally:
        os.close(null)
    if not _closed_at:
        _closed_at.append(time.time())
    return True


def closed_note() -> str | None:
    """One line for a run's record when its output's reader went away during it, else None."""
    if not _closed_at:
        return None
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_closed_at[0]))
    return f"output reader closed at {when}; the run went on, its output went nowhere from then on"


class _Console(Console):
    """Rich's console, but a closed pipe ends the output, not the process."""

    def on_broken_pipe(self) -> None:
        if not reader_gone():  # a stream that is neither stdout nor stderr: this console stops writing to it
            self.quiet = True


_out = _Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
_err = _Console(highlight=False, markup=False, emoji=False, soft_wrap=True, stderr=True)


def line(text: str, *, err: bool = False) -> None:
    """One progress line (stdout; stderr with ``err``), flushed; control characters from a run shown escaped.
    A closed reader makes it a no-op (``reader_gone``)."""
    (_err if err else _out).print(safe(text))
    try:
        (sys.stderr if err else sys.stdout).flush()
    except BrokenPipeError:
        reader_gone()


def interactive() -> bool:
    return _out.is_terminal


class Board:
    """One line per item that updates in place on a terminal; ``lines`` off a terminal."""

    def __init__(self, live: Live | None):
        self._live = live

    def show(self, lines: list[str]) -> None:
        if self._live is not None:
            self._live.update(Text(safe("\n".join(lines))))
        else:
            for text in lines:
                line(text)


@contextlib.contextmanager
def board() -> Iterator[Board]:
    if not interactive():
        yield Board(None)
        return
    with Live(Text(""), console=_out, refresh_per_second=4, transient=False) as live:
        yield Board(live)
