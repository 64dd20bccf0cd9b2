"""Processes that cannot outlive their parent: Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, prctl(2)).

The kernel sends the signal to a child when the thread that started it dies, even by ``kill -9``, and the setting
survives ``exec``. ``die_with_parent`` is a ``preexec_fn`` for ``subprocess`` (bench's etcd, launchers, pulumi);
``follow_parent`` is the same for a child that runs Python code of ours after it starts (DALI's reader
processes). Where prctl is not available (macOS) both do nothing and the normal teardown is all there is.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _follow(prctl: Callable[..., int], sig: int, parent: int) -> None:
    prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:  # the parent died between the fork and prctl
        os.kill(os.getpid(), int(sig))


def follow_parent(sig: int, parent: int) -> None:
    """In a child of ``parent`` running Python of its own: receive ``sig`` when the parent dies, and at once if it
    died already."""
    prctl = _prctl()
    if prctl is not None:
        _follow(prctl, sig, parent)


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child follow the calling process (None where prctl does not exist). prctl is
    looked up here, in the parent: between fork and exec the child may only call it (loading a library there can
    deadlock on a lock another of the parent's threads held at the fork)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    return lambda: _follow(prctl, sig, parent)
