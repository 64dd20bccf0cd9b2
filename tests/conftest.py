"""What every layer's tests share: the CPU kind a test runs as, where the processes they start keep their
temporary files, and the hostile files a reader must refuse (``hostile_file``).

A test whose outcome depends on the CPU's bf16 instructions (the precision a CPU process trains in,
workloads.train.common.cpu_choice) takes ``cpu_bf16`` and asserts what that capability implies, and is marked
``cpu_capability``: ``.ci/run`` runs those once as the machine is and once with ``EKSBENCH_CPU_BF16``
forcing the other kind, so a green CI means green on CPUs with and without bf16 instructions.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def session_tmpdir(tmp_path_factory) -> Iterator[Path]:
    """TMPDIR for this session and every process its tests start: a folder in the session's pytest folder, not
    the machine's /tmp. What those processes leave there (torchrun's torchelastic_* log folders, multiprocessing's
    pymp-*, a killed process's files) goes with that folder, which pytest removes after a green session
    (pytest.ini: tmp_path_retention_policy = failed)."""
    folder = tmp_path_factory.mktemp("tmp")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(folder))
        mp.setattr(tempfile, "tempdir", None)  # this process's tempfile reads TMPDIR again
        yield folder


@pytest.fixture(scope="session")
def cpu_bf16() -> bool:
    """Whether processes started by this test run train as on a CPU with bf16 instructions."""
    from workloads.train.common.cpu_choice import read_cpu_facts

    return read_cpu_facts().native_bf16


@pytest.fixture(scope="session")
def cpu_mixed_precision(cpu_bf16) -> str:
    """What a CPU process trains a mixed-precision experiment (amp-fp16, bf16) in."""
    return "bf16" if cpu_bf16 else "fp32"


def plant(path: Path, kind: str, huge: bytes = b"") -> None:
    """Put at ``path`` what a careless or hostile user can leave where eksbench reads a file: a named pipe with no
    writer ("fifo": a reader that blocks on it hangs for ever), a link to /dev/zero ("dev-zero": a reader without a
    bound fills memory), or else a regular file holding ``huge``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(huge)


@pytest.fixture
def hostile_file():
    """``plant``, for a test that reads what it plants."""
    return plant
