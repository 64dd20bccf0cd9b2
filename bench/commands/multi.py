"""``eksbench run a b ...``: one child process per stack, each with its own lifecycle.

Concurrent Pulumi stacks need one process (and work dir) each: the Automation API's inline
programs in threads have open upstream bugs, and every child does its own teardown. Output
lines are prefixed with the stack's name. SIGINT/SIGTERM are forwarded once to every child
(a terminal's Ctrl-C reaches them directly too: a second SIGINT is harmless to a child, whose
teardown ignores it). The exit code is the most serious of the children's: a signal's
(130/143) first, then 2, then 1, else 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from typing import Any

from program.stack_files import ROOT


def child_argv(args: Any, stack: str) -> list[str]:
    argv = [sys.executable, "-m", "bench", "run", stack]
    flags = {"--local": args.local, "--resume": args.resume, "--keep": args.keep, "--dry-run": args.dry_run,
             "--yes": args.yes}
    argv += [flag for flag, on in flags.items() if on]
    for flag, value in (("--experiment", args.experiment), ("--run-id", args.run_id),
                        ("--results-root", args.results_root), ("--progress-every", args.progress_every),
                        ("--deadline", args.deadline), ("--max-cost", args.max_cost), ("--poll", args.poll),
                        ("--project-dir", args.project_dir)):
        if value is not None:
            argv += [flag, str(value)]
    for setting in args.settings:
        argv += ["--set", setting]
    return argv


def _pump(stream: Any, prefix: str, out: Any, lock: threading.Lock) -> None:
    from bench.progress import reader_gone

    for line in iter(stream.readline, ""):
        with lock:
            try:
                out.write(f"[{prefix}] {line}")
                out.flush()
            except BrokenPipeError:  # our reader went away: keep draining, so the child never blocks on a full pipe
                reader_gone()
    stream.close()


def severity(code: int) -> tuple[int, int]:
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        return (3, code)
    return ({2: 2, 0: 0}.get(code, 1), code)


def run_many(args: Any) -> int:
    stacks = list(dict.fromkeys(args.stacks))
    if not args.local and not args.yes:  # one question per child, all at once, through prefixed pipes: none
        from bench.errors import fail

        return fail(f"several stacks on AWS ({', '.join(stacks)}) are not asked one by one: see what each creates "
                    "and costs with `eksbench plan STACK`, then pass --yes")
    lock = threading.Lock()
    children: dict[str, subprocess.Popen] = {}
    pumps = []
    for stack in stacks:
        p = subprocess.Popen(child_argv(args, stack), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, bufsize=1)
        children[stack] = p
        for stream, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
            t = threading.Thread(target=_pump, args=(stream, stack, out, lock), daemon=True)
            t.start()
            pumps.append(t)
    got: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        if got:
            return
        got.append(signum)
        for p in children.values():
            if p.poll() is None:
                p.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        codes = {stack: p.wait() for stack, p in children.items()}
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    for t in pumps:
        t.join(timeout=5)
    for stack, code in codes.items():
        print(f"stack {stack}: exit {code}")
    worst = max(codes.values(), key=severity)
    return worst if not got or worst in (130, 143) else 128 + got[0]
