"""Reading an experiment's node logs, wherever they are (a local run's files, S3, the cluster): which
node a log is, where the last lines of a log begin, what a line shows, and when each line was written.

A line ends at a newline. What it shows is what a terminal would: a carriage return starts it over, so a
progress bar that redrew itself a million times on one line shows its last state; and of that, at most
MAX_LINE bytes (16 KiB), then ``… (N bytes cut)``. A line of any length is read in bounded memory.

A node log is ``logs/<node id>.log`` (``node-0``, ``node-1``: the launcher's ``--node-id``, from the
Indexed Job's completion index on the cluster), or ``repeat_<k>/logs/<node id>.log`` for one repeat.
Beside it the launcher keeps ``<log>.times`` (``core.contract.names.node_log_times``): one line
``<byte offset of a log line> <epoch seconds>`` per line it wrote. Both come from a run: a times line that
is not two numbers, or whose offset is no line's, gives no time, never an error or another line's time.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Callable, Iterator

from bench.results.safe_paths import LINE_CHUNK, MAX_LINE
from core.contract.names import node_name
from core.contract.results_location import quoted

NO_TIME = "-".ljust(len("2026-01-01T00:00:00.000Z"))  # a line the times file does not date


def node_filter(names: list[str], node: str | None, where: str) -> Callable[[str], bool]:
    """Which logs ``--node`` keeps: ``node-1`` (or ``1``) is node-1's log, each repeat's too
    (``repeat_2/node-1``); a node none of ``names`` has is a ValueError naming the nodes there."""
    if node is None:
        return lambda _name: True
    want = node_name(int(node)) if node.isascii() and node.isdigit() and len(node) <= 9 else node
    keep = lambda name: name.rsplit("/", 1)[-1] == want  # noqa: E731
    if not any(keep(n) for n in names):
        nodes = sorted({n.rsplit("/", 1)[-1] for n in names})
        raise ValueError(f"no node {quoted(want)} in the logs of {where}; nodes: {', '.join(nodes) or '(none yet)'}")
    return keep


def tail_start(f: Any, size: int, lines: int) -> int:
    """The offset in ``f`` (a binary file of ``size`` bytes) where its last ``lines`` lines begin, read
    backwards a chunk at a time (a 200 MB log is never read whole to show its end)."""
    if lines <= 0:
        return size
    end = size
    if size:
        f.seek(size - 1)
        end = size - 1 if f.read(1) == b"\n" else size  # the last newline ends the last line
    count, pos = 0, end
    while pos > 0:
        step = min(LINE_CHUNK, pos)
        pos -= step
        f.seek(pos)
        block = f.read(step)
        i = len(block)
        while (i := block.rfind(b"\n", 0, i)) >= 0:
            count += 1
            if count == lines:
                return pos + i + 1
    return 0


STAMP_BYTES = 40  # the kubelet's time in front of a line: RFC 3339 to the nanosecond, 30 bytes in UTC, and a space


def whole_chars(raw: bytes) -> bytes:
    """``raw`` without the UTF-8 character its end cuts in two (a lead byte short of its continuation bytes)."""
    for back in range(1, min(4, len(raw)) + 1):
        c = raw[-back]
        if c & 0xC0 != 0x80:  # ASCII or a lead byte: how many bytes its character has
            need = 1 if c < 0x80 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            return raw if need <= back else raw[:-back]
    return raw


class _Line:
    """One log line as its bytes stream past, in bounded memory: what a terminal would show of it.

    A carriage return starts the line over (a progress bar redraws itself so, thousands of times on one
    line), so a line shows its last segment with text in it, as the terminal it was written for would. Of
    that segment the first MAX_LINE bytes are kept and the rest counted: ``text`` cuts it once, saying how
    many bytes it dropped. ``stamp``: the line starts with a time and a space (the kubelet's
    ``timestamps=true``), kept in front of the segment shown."""

    def __init__(self, stamp: bool = False):
        self.pending: bytes | None = b"" if stamp else None  # the stamp read so far; None: no stamp to read
        self.prefix = b""
        self.head, self.size = bytearray(), 0  # the segment being read: its first MAX_LINE bytes, its size
        self.last, self.last_size = b"", 0  # the last segment a carriage return ended that had text

    def add(self, data: bytes) -> None:
        """More of the line (no newline in ``data``)."""
        if self.pending is not None:
            data = self._stamp(data)
        first = data.find(b"\r")
        if first < 0:
            return self._extend(data)
        self._extend(data[:first])
        self._end_segment()
        final = data.rfind(b"\r")
        middle = data[first + 1:final].rstrip(b"\r")  # whole segments: only the last with text counts
        if middle:
            segment = middle[middle.rfind(b"\r") + 1:]
            self.last, self.last_size = segment[:MAX_LINE], len(segment)
        self._extend(data[final + 1:])

    def _stamp(self, data: bytes) -> bytes:
        """What of ``data`` follows the stamp; the stamp goes to ``prefix`` (none past STAMP_BYTES: text)."""
        data = self.pending + data
        space = data.find(b" ", 0, STAMP_BYTES)
        if space < 0 and len(data) < STAMP_BYTES:
            self.pending = data
            return b""
        self.pending = None
        self.prefix = data[:space + 1]  # empty when no space ends a stamp
        return data[space + 1:]

    def _extend(self, data: bytes) -> None:
        room = MAX_LINE - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.size += len(data)

    def _end_segment(self) -> None:
        if self.size:
            self.last, self.last_size = bytes(self.head), self.size
        self.head, self.size = bytearray(), 0

    def text(self) -> str:
        """The segment shown, decoded, with ``… (N bytes cut)`` where it was longer than MAX_LINE bytes."""
        if self.pending:  # the line ended inside what could have been a stamp: it is text
            data, self.pending = self.pending, None
            self.add(data)
        shown, size = (self.head, self.size) if self.size or not self.last_size else (self.last, self.last_size)
        shown = bytes(shown) if size <= len(shown) else whole_chars(bytes(shown))
        line = (self.prefix + shown).decode("utf-8", "replace")
        return line if size <= len(shown) else f"{line}… ({size - len(shown):,} bytes cut)"


def offset_lines(chunks: Iterator[bytes], start: int = 0, *, partial: bool = True,
                 stamp: bool = False) -> Iterator[tuple[int, int, str]]:
    """``(offset, next offset, line)`` for each line of a stream that begins at byte ``start`` of its file,
    as ``_Line`` shows it: the last carriage-return segment, cut once at MAX_LINE bytes with a note; memory
    stays bounded by one chunk and MAX_LINE however long a line is. ``partial``: the last line too when no
    newline ends it yet (a times file's last line may be half written: left for later); ``stamp``: each line
    starts with the kubelet's time, kept in front."""
    pending: _Line | None = None  # a line that began in an earlier chunk
    pos, size = start, 0  # where the line being read begins, and its bytes so far
    for chunk in chunks:
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            size += len(piece) + 1
            if pending is None and size <= MAX_LINE and b"\r" not in piece:  # most lines: read at once
                text = piece.decode("utf-8", "replace")
            else:
                pending = pending or _Line(stamp)
                pending.add(piece)
                text, pending = pending.text(), None
            yield pos, pos + size, text
            pos, size = pos + size, 0
        if rest:
            pending = pending or _Line(stamp)
            pending.add(rest)
            size += len(rest)
    if pending is not None and partial:
        yield pos, pos + size, pending.text()


def time_text(t: float | None) -> str:
    """``2026-11-27T09:12:39.123Z`` (UTC, to the millisecond), or NO_TIME."""
    if t is None:
        return NO_TIME
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class LineTimes:
    """The times of a node log's lines, asked for in increasing offsets (as the log is read).

    ``open_at(position)``: the times file's bytes from ``position`` on, as chunks (None when there is no
    such file); with ``again`` (following a growing log) it is opened again from where the last entry was
    taken once what it gave ran out, else once only."""

    def __init__(self, open_at: Callable[[int], Iterator[bytes] | None], *, again: bool = False):
        self.open_at, self.again = open_at, again
        self.pos = 0  # where the first entry not yet taken begins
        self.entries: Iterator[tuple[int, int, str]] | None = None
        self.head: tuple[int, float, int] | None = None  # (log offset, time, end of its entry)
        self.done = False

    def _next(self) -> tuple[int, float, int] | None:
        while not self.done:
            if self.entries is None:
                chunks = self.open_at(self.pos)
                if chunks is None:
                    self.done = not self.again
                    return None
                self.entries = offset_lines(chunks, self.pos, partial=False)
            for _, end, line in self.entries:
                entry = _entry(line, end)
                if entry is not None:
                    return entry
                self.pos = end  # not an entry: passed over
            self.entries, self.done = None, not self.again
            return None
        return None

    def at(self, offset: int) -> float | None:
        """The time of the log line that begins at ``offset``; None when no entry dates it."""
        while True:
            if self.head is None:
                self.head = self._next()
                if self.head is None:
                    return None
            at, t, end = self.head
            if at > offset:
                return None  # a later line's
            self.pos, self.head = end, None
            if at == offset:
                return t


def _entry(line: str, end: int) -> tuple[int, float, int] | None:
    parts = line.split(" ")
    if len(parts) != 2 or not parts[0].isdigit() or len(parts[0]) > 18:
        return None
    try:
        t = float(parts[1])
    except ValueError:
        return None
    return (int(parts[0]), t, end) if math.isfinite(t) and 0 < t < 1e11 else None


RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z")


def kubelet_time(line: str) -> tuple[str, str]:
    """(``time_text``'s form of the time, the rest) of a pod log line the API returned with ``timestamps=true``
    (``2026-11-27T09:12:39.123456789Z text``: RFC 3339 with up to nanoseconds, Go's RFC3339Nano, which drops
    trailing zeros); (NO_TIME, the line) when it does not start with one."""
    stamp, _, rest = line.partition(" ")
    m = RFC3339.fullmatch(stamp)
    if not m:
        return NO_TIME, line
    return f"{m.group(1)}.{((m.group(2) or '') + '000')[:3]}Z", rest
