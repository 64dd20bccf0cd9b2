"""What one framework's entry in the local launch table (``bench.local_launch``) gives: the local
processes standing in for an experiment's pods, and how they meet. Plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class LocalProcess:
    argv: tuple[str, ...]  # argv[0] is ``python``
    python: str  # the interpreter it runs from (a framework's own venv, or this one)
    role: str  # e.g. "node-0": what the process stands in for
    env: Mapping[str, str] = field(default_factory=dict)  # added to the run's env


@dataclass(frozen=True)
class FrameworkLocal:
    # (LocalExperiment, *, endpoint "127.0.0.1:PORT" (or etcd's), rdzv_id) -> its processes
    processes: Callable[..., list[LocalProcess]]
    rendezvous: str | None = None  # replaces the experiment's rdzv_backend locally (None: keep it)

