"""A small progress object on S3, so ``bench run`` can show step/total and samples/s while Jobs run.

The training logs carry no per-step lines and the metrics files live on the shared file system
until the end, so the launcher's summary node publishes ``<results-uri>progress.json`` every
``every`` seconds (one small PUT: about 120 requests an hour, a fraction of a cent):

    {"step": 120, "total": 500, "samples_per_s": 1834.2, "world_size": 16, "updated_at": "..."}

``bench run`` reads it (bench.cloud.backend); without it the live line shows the state and the
elapsed time only. Imports only ``workloads.train.common.metrics`` and boto3: it ships with the pods' code.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from core.contract import strict_json
from core.contract.names import PROGRESS_FILE


def progress_document(results_dir: str | Path, *, total: int | None, now: float | None = None,
                      window: int = 20) -> dict[str, Any]:
    """Latest step over all ranks and the recent rate (sum over ranks of the last ``window`` steps)."""
    from workloads.train.common.metrics import rank_files, read_jsonl

    step, rate, world = 0, 0.0, None
    for path in rank_files(results_dir).values():
        lines = [r for r in read_jsonl(path)[-window:] if not r.get("warmup")]
        if not lines:
            continue
        step = max(step, int(lines[-1].get("step", 0)))
        world = lines[-1].get("world_size", world)
        seconds = sum(r.get("step_time_s", 0) for r in lines)
        if seconds > 0:
            rate += sum(r.get("samples", 0) for r in lines) / seconds
    return {"step": step, "total": total, "samples_per_s": round(rate, 1) if rate else None,
            "world_size": world,
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now or time.time()))}


class ProgressPublisher:
    """A daemon thread that PUTs ``progress_document`` to ``s3://bucket/<prefix>progress.json``."""

    def __init__(self, results_dir: str | Path, bucket: str, prefix: str, *, total: int | None,
                 every: float = 30.0, client: Any = None):
        self.results_dir, self.bucket, self.key = results_dir, bucket, prefix + PROGRESS_FILE
        self.total, self.every, self.client = total, every, client
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress-publisher", daemon=True)

    def start(self) -> "ProgressPublisher":
        self._thread.start()
        return self

    def publish(self) -> None:
        if self.client is None:
            import boto3

            self.client = boto3.client("s3")
        body = strict_json.dumps(progress_document(self.results_dir, total=self.total)).encode()
        self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, ContentType="application/json")

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.publish()
            except Exception:  # noqa: BLE001 - progress is best effort; the summary is what counts
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
