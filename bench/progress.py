"""The command line's progress lines, through one library: rich.

Everything the run prints while it works (experiment progress, ``pulumi up`` resource
groups, teardown) goes through ``line``. Off a terminal (CI logs, tests, pipes) rich writes the
text exactly as given: no colour, no wrapping, no markup parsing, so log lines stay greppable
and the local run prints what it always printed. On a terminal ``live`` keeps one line per
experiment in place instead of scrolling. The console resolves ``sys.stdout`` at each write,
so redirected streams (pytest's capsys, notebooks) are honoured.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

from bench.terminal import safe

_out = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
_err = Console(highlight=False, markup=False, emoji=False, soft_wrap=True, stderr=True)


def line(text: str, *, err: bool = False) -> None:
    """One progress line (stdout; stderr with ``err``), flushed; control characters from a run shown escaped."""
    (_err if err else _out).print(safe(text))
    (sys.stderr if err else sys.stdout).flush()


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
