"""Progress of long copies (hashing, generating, uploading), through the CLI's one progress library: rich.

On a terminal, rich's progress bar redraws one line with files, bytes, rate and time left;
elsewhere (CI logs, pipes) a plain line every few seconds, so logs stay short and greppable.
Thread-safe, since uploads finish on worker threads. It writes to stderr: stdout carries the
command's result.
"""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn,
                           TransferSpeedColumn)
from rich.progress import Progress as RichProgress

from datasets.catalog import human_bytes

PLAIN_EVERY_S = 5.0


class Progress:
    """``Progress(label, files, nbytes)``; ``advance(files, nbytes)`` from any thread; ``close()``.

    ``nbytes`` 0 means the total is not known in advance (generated files): the bar counts files.
    """

    def __init__(self, label: str, files: int, nbytes: int, *, stream=None, clock=time.monotonic):
        self.label, self.files, self.nbytes = label, files, nbytes
        self.stream = stream or sys.stderr
        self.clock = clock
        self.done_files = self.done_bytes = 0
        self.start = self.last = clock()
        self.lock = threading.Lock()
        console = Console(file=self.stream, highlight=False, markup=False)
        self._bar = None
        if console.is_terminal:
            by_bytes = bool(nbytes)
            columns = [TextColumn(label), BarColumn(), MofNCompleteColumn() if not by_bytes else DownloadColumn(),
                       TransferSpeedColumn() if by_bytes else TextColumn(""), TimeRemainingColumn()]
            self._bar = RichProgress(*columns, console=console, transient=False)
            self._task = self._bar.add_task(label, total=nbytes if by_bytes else files)
            self._bar.start()

    def advance(self, files: int = 0, nbytes: int = 0) -> None:
        with self.lock:
            self.done_files += files
            self.done_bytes += nbytes
            if self._bar is not None:
                self._bar.update(self._task, advance=nbytes if self.nbytes else files)
                return
            now = self.clock()
            if now - self.last >= PLAIN_EVERY_S:
                self.last = now
                self._plain(now)

    def close(self) -> None:
        with self.lock:
            if self._bar is not None:
                self._bar.stop()
            else:
                self._plain(self.clock())

    def _plain(self, now: float) -> None:
        rate = self.done_bytes / max(now - self.start, 1e-9)
        if self.nbytes:
            pct = 100.0 * self.done_bytes / self.nbytes
            amount = f"{human_bytes(self.done_bytes)}/{human_bytes(self.nbytes)}"
        else:
            pct = 100.0 * self.done_files / self.files if self.files else 100.0
            amount = human_bytes(self.done_bytes)
        self.stream.write(f"{self.label}: {self.done_files}/{self.files} files, {amount} ({pct:.0f}%), "
                          f"{human_bytes(int(rate))}/s\n")
        self.stream.flush()
