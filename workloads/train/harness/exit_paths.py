"""How the launcher still leaves a summary when things go wrong (workloads.train.harness.launch).

- ``StopSignals``: SIGTERM/SIGINT are held for the launcher's whole life. The kubelet sends
  SIGTERM to a pod's containers and SIGKILL after ``terminationGracePeriodSeconds``
  (Kubernetes docs, "Pod Lifecycle", termination of Pods); a Job whose success policy is met
  removes its lingering pods that way (batch/v1 ``SuccessPolicy``). A default handler would
  end the launcher in the middle of its upload, so the signal is forwarded to the command while
  it runs and only recorded before and after it.
- ``fallback_dir``, ``open_log``, ``write_summary``: a results directory that cannot be written
  (missing, owned by another user) must not cost the summary: the log and summary.json go to
  ``$TMPDIR/eksbench-results/<node id>-<pid>/`` (the pods' /tmp is a writable emptyDir) and are
  uploaded from there to the same keys.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from core.contract import strict_json
from core.contract.names import SUMMARY_FILE, node_log
from workloads.train.common.files import atomic_write


def fallback_dir(node_id: str) -> Path:
    """Where the log and summary go when the results directory cannot be written: one folder
    per launcher process, so nothing a previous run left there is ever uploaded as this run's."""
    return Path(tempfile.gettempdir()) / "eksbench-results" / f"{node_id}-{os.getpid()}"


def open_log(dirs: Sequence[Path], node_id: str) -> tuple[Any, Path | None, str | None]:
    """(file, the directory it is under, why the first directory failed) for ``logs/<node id>.log``
    in the first directory that can be written; (None, None, why) when none can."""
    why = None
    for d in dirs:
        path = d / node_log(node_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return open(path, "ab", buffering=0), d, why
        except OSError as e:
            why = why or f"{d}: {type(e).__name__}: {e}"
    return None, None, why


def write_summary(doc: dict[str, Any], dirs: Sequence[Path]) -> Path | None:
    """summary.json, atomically, in the first of ``dirs`` that takes it; a failure before the
    last is recorded in the document as ``results_dir_error``. None when none takes it."""
    for d in dirs:
        try:
            text = strict_json.dumps(doc, indent=2, sort_keys=False).encode()
            atomic_write(d / SUMMARY_FILE, lambda f: f.write(text))
            return d
        except OSError as e:
            doc.setdefault("results_dir_error", f"{d}: {type(e).__name__}: {e}")
            print(f"cannot write {d / SUMMARY_FILE}: {type(e).__name__}: {e}", file=sys.stderr)
    return None


class StopSignals:
    """SIGTERM/SIGINT/SIGHUP for the launcher's whole life: forwarded to the command while it runs,
    only recorded before and after (the summary and the upload must finish; the kubelet's
    SIGKILL at the end of the grace period still ends everything)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.child: Any = None  # child.Child while the command runs
        self.previous: dict[int, Any] = {}

    def install(self) -> "StopSignals":
        # SIGHUP too: a closed terminal must still leave a summary, not kill the launcher mid-run.
        self.previous = {sig: signal.signal(sig, self) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        return self

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def __call__(self, signum: int, _frame: Any = None) -> None:
        self.name = signal.Signals(signum).name
        if self.child is not None:
            self.child.forward(signum)
        else:
            print(f"launcher: {self.name} recorded; finishing the summary and upload", file=sys.stderr, flush=True)
