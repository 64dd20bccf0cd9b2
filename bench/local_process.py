"""One process of a local run, as a framework's entry in ``bench.local_launchers`` gives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class LocalProcess:
    """One local process: its role (e.g. ``pserver-0``) and command line."""
    role: str
    argv: tuple[str, ...]  # the launcher, ``--`` and the framework's command
    env: Mapping[str, str] = field(default_factory=dict)  # added to the run's child env
