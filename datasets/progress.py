"""A small progress line on stderr for long copies: files and bytes done, and the rate.

On a terminal it redraws one line; otherwise (CI logs) it prints a line every few
seconds. Thread-safe, since uploads finish on worker threads.
"""

from __future__ import annotations

import sys
import threading
import time

from datasets.catalog import human_bytes


class Progress:
    def __init__(self, label: str, files: int, nbytes: int, *, stream=None, clock=time.monotonic):
        self.label, self.files, self.nbytes = label, files, nbytes
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.done_files = self.done_bytes = 0
        self.start = self.last = clock()
        self.lock = threading.Lock()

    def advance(self, files: int = 0, nbytes: int = 0) -> None:
        with self.lock:
            self.done_files += files
            self.done_bytes += nbytes
            now = self.clock()
            if now - self.last >= (0.2 if self.tty else 5.0):
                self.last = now
                self._draw(now)

    def close(self) -> None:
        with self.lock:
            self._draw(self.clock(), end="\n")

    def _draw(self, now: float, end: str = "") -> None:
        rate = self.done_bytes / max(now - self.start, 1e-9)
        if self.nbytes:  # 0: the total is not known in advance (generated files)
            pct = 100.0 * self.done_bytes / self.nbytes
            amount = f"{human_bytes(self.done_bytes)}/{human_bytes(self.nbytes)}"
        else:
            pct = 100.0 * self.done_files / self.files if self.files else 100.0
            amount = human_bytes(self.done_bytes)
        line = (f"{self.label}: {self.done_files}/{self.files} files, {amount} ({pct:.0f}%), "
                f"{human_bytes(int(rate))}/s")
        if self.tty:
            self.stream.write("\r" + line + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
