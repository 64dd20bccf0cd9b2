"""Runs the Pulumi program under Pulumi's mock engine (``program.mocks``), and gives up on it at once.

``run_program`` is what ``program.offline`` (``bench plan``) and the mock-engine tests call. Pulumi's own way to
finish a program lets every queued registration run before an exception comes out, and a thread pool works through
its queue even at the interpreter's exit; here the first exception (the program's, a registration's or a signal's)
cancels what is queued, so a plan stops in seconds, not minutes.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pulumi
from pulumi.runtime import mocks as pmocks

from core.catalog.aws import DEFAULT_REGION
from program.mocks import EksbenchMocks, GaveUp, RecordingMonitor, plain


async def _resolve(value: Any) -> Any:
    output = pulumi.Output.from_input(value)
    if not await output.is_known():
        return "<unknown>"
    if await output.is_secret():
        return "[secret]"
    return await output.future()


# How often the wait for outstanding registrations looks for a failed one or a signal (program.mock_run._drain).
POLL_S = 0.05
GC_THRESHOLD = 50_000  # new objects between collections of the youngest generation while a plan runs (700 by default)
SETTLE_S = 5.0  # the longest _abandon waits for the registrations the worker threads are answering


class _Signals:
    """SIGINT and SIGTERM while the program runs under the mocks, for handlers that raise (``bench.cli`` turns
    SIGTERM into an exception). The handler runs at once, as before. When it raises, the monitor stops at once, so the
    worker threads refuse what is queued even before the exception is out, and the signal is kept: an exception
    raised from a handler can land in a weakref callback or a finalizer, which Python reports as "Exception ignored"
    and drops (the plan then went on to the end), so ``deliver`` hands it to the handler again once the program has
    built and at each look of ``_drain``. Nothing changes for a signal without a Python handler, or off the main thread
    (no handler runs there)."""

    def __init__(self, monitor: RecordingMonitor) -> None:
        self.monitor = monitor
        self.handlers: dict[int, Any] = {}
        self.pending: int | None = None

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(signum)
                if callable(handler):
                    self.handlers[signum] = handler
                    signal.signal(signum, self._handle)
        return self

    def __exit__(self, *_exc: Any) -> None:
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        try:
            self.handlers[signum](signum, frame)
        except BaseException:
            self.monitor.stopped = True  # an attribute, safe in a handler (a lock the main thread holds is not)
            self.pending = self.pending or signum
            raise

    def deliver(self) -> None:
        """A signal whose handler's exception was dropped, to its handler again (which raises), once."""
        signum, self.pending = self.pending, None
        if signum is not None:
            self.handlers[signum](signum, None)


async def _drain(monitor: RecordingMonitor, signals: _Signals) -> None:
    """Pulumi's own wait for every outstanding RPC (pulumi/runtime/stack.py ``wait_for_rpcs``), given up at the first
    one that fails or at a signal. Pulumi's wait awaits the RPCs last first and raises a failure only once it reaches
    it, so an early failure let every later registration run first. The first failure is ``monitor.failure``
    (the others give up after it), else the RPC manager's record of it (pulumi/runtime/rpc_manager.py
    ``unhandled_exception``, set as soon as it happens)."""
    from pulumi.runtime import stack as runtime_stack
    from pulumi.runtime.settings import _get_rpc_manager

    manager = _get_rpc_manager()
    waiting = asyncio.ensure_future(runtime_stack.wait_for_rpcs())
    try:
        while not waiting.done():
            signals.deliver()
            if monitor.failure is not None:
                raise monitor.failure
            if manager.unhandled_exception is not None:
                raise manager.unhandled_exception.with_traceback(manager.exception_traceback)
            await asyncio.wait({waiting}, timeout=POLL_S)
    finally:
        waiting.cancel()
    # Pulumi's wait may have ended at a registration that gave up (GaveUp): after a signal, or after the failure
    signals.deliver()
    if monitor.failure is not None:
        raise monitor.failure
    waiting.result()


def _abandon(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor, monitor: RecordingMonitor,
             rounds: int = 10) -> None:
    """Give up on everything the program queued, at once: registrations waiting for a thread are cancelled, never
    run (a thread pool otherwise runs its whole queue, even at the interpreter's exit), and so is every task on the
    loop; the ones a thread is running (one registration each, milliseconds) are waited for, up to SETTLE_S, so
    nothing works on after this (not the threads themselves: a lock a signal's exception left taken could hold one
    for good). A cancelled task may wake others: a few rounds."""
    executor.shutdown(wait=False, cancel_futures=True)
    for _ in range(rounds):
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    settle = time.monotonic() + SETTLE_S
    while monitor.busy and time.monotonic() < settle:
        time.sleep(POLL_S / 10)


def _report_unless_given_up(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: a registration refused with GaveUp once the plan gave up is expected and
    nobody awaits it any more, so its future is not reported ("Future exception was never retrieved", with a
    traceback, when it is collected, often in a later plan or long after); anything else is, as asyncio would."""
    if not isinstance(context.get("exception"), GaveUp):
        loop.default_exception_handler(context)


def run_program(program, *, project: str, stack: str, config: dict[str, str],
                mocks: EksbenchMocks | None = None, logger=None,
                monitor: RecordingMonitor | None = None) -> RecordingMonitor:
    """Run ``program()`` inside a Stack under the mock engine; return the recording monitor.

    Raises whatever the program raises (ConfigError for bad input), or the first registration that fails, at
    once: nothing queued after it runs. A signal's handler that raises (SIGTERM under ``bench.cli``) stops it so too.
    """
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings  # noqa: F401

    mocks = mocks or EksbenchMocks(region=config.get("aws:region", DEFAULT_REGION))
    monitor = monitor or RecordingMonitor(mocks)
    # The loop must exist before set_mocks: the runtime binds its futures to the current loop. The RPCs run in
    # the loop's default executor (pulumi/runtime/resource.py: run_in_executor(None, ...)): ours, to cancel.
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_report_unless_given_up)
    # Each thread's loop (the mock monitor asks for one on its thread: pulumi's _ensure_event_loop) is made here,
    # to be closed with the plan: left to the garbage collector, each said "unclosed event loop" later, anywhere.
    thread_loops: list[asyncio.AbstractEventLoop] = []
    executor = ThreadPoolExecutor(thread_name_prefix="eksbench-plan", initializer=_own_loop, initargs=(thread_loops,))
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    runtime_config.set_all_config(config)
    pmocks.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
    # A sweep registers thousands of objects, each a tree of dicts the collector would walk again and again:
    # fewer collections, and none of what was there before the plan, took a fifth off a plan of 128 runs.
    thresholds = gc.get_threshold()
    try:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
        with _Signals(monitor) as signals:
            # set_mocks already made the root Stack; run the program, let the root register
            # its outputs, then drain every outstanding RPC (that is where program errors surface).
            try:
                program()
                signals.deliver()
                loop.run_until_complete(_drain(monitor, signals))
            except BaseException:
                _abandon(loop, executor, monitor)
                raise
            # Under mocks the root Stack registered its (empty) outputs before the program ran,
            # so the exports are read from it directly and resolved here.
            root = settings.get_root_resource()
            exports = dict(getattr(root, "outputs", {}) or {})
            monitor.stack_outputs = {k: plain(loop.run_until_complete(_resolve(v))) for k, v in exports.items()}
            signals.deliver()
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        settings.reset_options()
        loop.close()  # shuts the threads down, without waiting
        if not monitor.busy:  # no registration runs on a thread (one a signal left may): their loops can go
            executor.shutdown(wait=True)
            for thread_loop in thread_loops:
                thread_loop.close()
        _leave_a_loop()
    return monitor


def _own_loop(loops: list[asyncio.AbstractEventLoop]) -> None:
    """A plan thread's start: its own event loop, kept in ``loops`` to be closed."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loops.append(loop)


_SPARE = threading.local()


def _leave_a_loop() -> None:
    """Leave this thread a usable loop (later Pulumi code in this process expects one): the same one after every
    plan, not a new one each time for the garbage collector to find unclosed."""
    loop = getattr(_SPARE, "loop", None)
    if loop is None or loop.is_closed():
        loop = _SPARE.loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
