"""One orchestrator for every run: provision, start, watch, teardown, collect; teardown ALWAYS.

A run is a ``Backend`` (``bench.local.backend.LocalBackend`` for ``--local``,
``bench.cloud.backend.CloudBackend`` for AWS) driven by ``run_lifecycle``:

    provision -> start -> watch -> teardown -> collect -> results table

``teardown`` runs whatever happened before it: success, a failed experiment, a failed
``provision``, an exception, SIGINT/SIGTERM, the run's deadline or the budget. It runs
before ``collect`` because the results outlive the environment (local files; the retained
S3 bucket) while the bill does not. Signals never raise into the backend: the handler records
the first one in ``Control`` and calls ``Backend.interrupt`` (which may only nudge, e.g.
forward SIGINT to the Pulumi CLI); every phase polls ``Control.stopping``. Later signals
are reported and otherwise ignored, so a second Ctrl-C cannot cut a teardown short.

A reader of the output that goes away (``bench run dev --local | head -3``) stops the output only: the
run goes on to its end, collects, and ``Outcome.output_note`` says when its output stopped
(``bench.progress.reader_gone``).

Exit codes: 0 every experiment succeeded; 1 an experiment, the environment or the
teardown failed; 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (after teardown). Preflight
refusals (exit 2) happen before a backend exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from bench import progress

OK, FAILED, REFUSED = 0, 1, 2
SUCCESS_STATES = ("succeeded", "skipped")


class BackendError(RuntimeError):
    """A phase failed in a way the user can act on; the message says how (no traceback)."""


class Control:
    """What every phase consults: should we stop, and why (signal, deadline, budget)."""

    def __init__(self, *, deadline_s: float | None = None, hourly_usd: float = 0.0,
                 max_cost_usd: float | None = None, teardown_reserve_h: float = 10 / 60,
                 clock: Callable[[], float] = time.monotonic, prices: str = ""):
        self.clock = clock
        self.started = clock()
        self.deadline_s = deadline_s
        self.hourly_usd = hourly_usd
        self.prices = prices  # what hourly_usd is priced at, printed beside it (region, source, date)
        self.max_cost_usd = max_cost_usd
        self.teardown_reserve_h = teardown_reserve_h
        self.billing_since: float | None = None
        self.reason: str | None = None  # interrupted | deadline | budget
        self.signum: int | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()

    # -- stopping
    def request_stop(self, reason: str, signum: int | None = None) -> bool:
        """Record why we stop; True for the first request (later ones keep the first reason)."""
        with self._lock:
            if self.reason is not None:
                return False
            self.reason, self.signum = reason, signum
        self._event.set()
        return True

    @property
    def stopping(self) -> bool:
        return self._event.is_set()

    def check(self) -> bool:
        """Apply the run's deadline and budget; True when the run must stop."""
        if not self.stopping:
            if self.deadline_s is not None and self.elapsed() > self.deadline_s:
                if self.request_stop("deadline"):
                    progress.line(f"run deadline reached ({self.deadline_s / 60:.1f} min): stopping", err=True)
            elif self.max_cost_usd is not None and self.committed_usd() > self.max_cost_usd:
                if self.request_stop("budget"):
                    at = f" ({self.prices})" if self.prices else ""
                    progress.line(f"budget reached: ${self.spent_usd():.2f} spent{at}, ${self.max_cost_usd:.2f} "
                                  f"allowed (keeping {self.teardown_reserve_h * 60:.0f} min for teardown): stopping",
                                  err=True)
        return self.stopping

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` (woken at once by a stop); True when the run must stop."""
        self._event.wait(max(0.0, seconds))
        return self.check()

    # -- time and money
    def elapsed(self) -> float:
        return self.clock() - self.started

    def start_billing(self) -> None:
        if self.billing_since is None:
            self.billing_since = self.clock()

    def spent_usd(self) -> float:
        if self.billing_since is None:
            return 0.0
        return self.hourly_usd * (self.clock() - self.billing_since) / 3600

    def committed_usd(self) -> float:
        """Spent so far plus the teardown still to pay for."""
        if self.billing_since is None:
            return 0.0
        return self.spent_usd() + self.hourly_usd * self.teardown_reserve_h

    def exit_code(self, failed: bool) -> int:
        if self.signum is not None:
            return 128 + self.signum
        return FAILED if failed else OK


class Backend(Protocol):
    """Where the experiments run. Phases are called in order from the main thread."""

    name: str

    def provision(self, ctl: Control) -> None:
        """Build the environment (local: data, etcd; cloud: ``pulumi up``). Raise BackendError on failure."""

    def start(self, ctl: Control) -> None:
        """Start the experiments that do not start themselves (cloud: the Jobs came with ``up``)."""

    def watch(self, ctl: Control) -> None:
        """Return when every experiment has ended (or ``ctl.stopping``); enforce per-experiment deadlines."""

    def interrupt(self, signum: int) -> None:
        """Called from the signal handler after the first signal: nudge the running phase, quickly."""

    def teardown(self, ctl: Control) -> bool:
        """Release everything that costs (always called); True when nothing is left behind."""

    def collect(self, ctl: Control) -> list[dict[str, Any]]:
        """The results rows (``terminal.results_table``), results copied to ./results/..."""

    # Observing, outside any run (``bench status``, ``bench logs``; TorchX's Scheduler.describe and log_iter).
    def status(self) -> dict[str, Any]:
        """The stack's runs this backend can see: ``{"rows": [...]}``, one ``bench.results.overview.status_row``
        per experiment run, plus what else it knows (the cloud: ``state``, ``outputs``, ``where``, ``notes``)."""

    def logs(self, experiment: str, *, run_id: str | None = None, follow: bool = False, tail: int | None = None,
             node: str | None = None, timestamps: bool = False) -> Iterator[str]:
        """The experiment's node log lines (``<node>: <line>``; ``tail``: each log's last lines, ``node``: one
        node's, ``timestamps``: ``<node>: <UTC time> <line>``); FileNotFoundError saying where it looked,
        ValueError naming the nodes for a node with no log."""


@dataclass
class Outcome:
    code: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None  # why it stopped early, if it did
    torn_down: bool = True
    timings: dict[str, float] = field(default_factory=dict)
    # why the run's output stopped before its end, if it did (its reader went away: ``progress.closed_note``); the
    # run went on to the end all the same, and the caller keeps this line in the run's record
    output_note: str | None = None


# SIGHUP: a closed terminal (or an ssh session that dropped) must tear down too; on AWS that is
# what runs `pulumi destroy`.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def detach_from_terminal() -> None:
    """After a hang-up, writes to the terminal fail (EIO): point stdout and stderr that were a terminal at
    /dev/null, so the teardown's progress lines cannot stop the teardown. Files and pipes are kept."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            try:
                if os.isatty(fd):
                    os.dup2(null, fd)
            except OSError:
                pass
    finally:
        os.close(null)


@contextlib.contextmanager
def handle_signals(ctl: Control, on_first: Callable[[int], None]) -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP -> ``ctl.request_stop("interrupted")`` + ``on_first``; no exception is raised.

    Only the main thread can install handlers; elsewhere (a notebook's worker thread) the
    caller's own handling applies and this is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            detach_from_terminal()
        if ctl.request_stop("interrupted", signum):
            os.write(2, f"\n{name} received: stopping, then tearing down (this can take minutes; "
                        f"a second signal does not skip the teardown)\n".encode())
            on_first(signum)
        else:
            os.write(2, f"{name} received again: still stopping; the teardown runs to the end "
                        f"(it is what stops the bill)\n".encode())

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_lifecycle(backend: Backend, ctl: Control) -> Outcome:
    """Drive ``backend`` through its phases; teardown always runs. Prints the results table."""
    from bench.terminal import results_table

    failed = False
    timings: dict[str, float] = {}
    with handle_signals(ctl, backend.interrupt):
        try:
            backend.provision(ctl)
            timings["provisioned"] = ctl.elapsed()
            if not ctl.check():
                backend.start(ctl)
            if not ctl.check():
                backend.watch(ctl)
            timings["watched"] = ctl.elapsed()
        except BackendError as e:
            failed = True
            progress.line(f"error: {e}", err=True)
        except Exception:  # noqa: BLE001 - whatever it was, the environment must still go
            failed = True
            progress.line("error: unexpected failure, tearing down:\n" + traceback.format_exc().rstrip(), err=True)
        finally:
            timings["teardown_started"] = ctl.elapsed()
            try:
                torn_down = backend.teardown(ctl)
            except Exception:  # noqa: BLE001
                torn_down = False
                progress.line("error: teardown failed:\n" + traceback.format_exc().rstrip(), err=True)
            timings["teardown_ended"] = ctl.elapsed()
        try:
            rows = backend.collect(ctl)
        except BackendError as e:
            rows, failed = [], True
            progress.line(f"error: {e}", err=True)
        except Exception:  # noqa: BLE001
            rows, failed = [], True
            progress.line("error: collecting results failed:\n" + traceback.format_exc().rstrip(), err=True)
    if rows:
        progress.line("")
        progress.line(results_table(rows))
    progress.line(f"total wall time {ctl.elapsed():.1f}s")
    if note := progress.closed_note():
        progress.line(f"note: {note}", err=True)  # seen where stderr still has a reader (`run ... | head`)
    failed = failed or not torn_down or ctl.reason in ("deadline", "budget") or not rows \
        or any(r.get("status") not in SUCCESS_STATES for r in rows)
    return Outcome(code=ctl.exit_code(failed), rows=rows, reason=ctl.reason, torn_down=torn_down, timings=timings,
                   output_note=note)
