"""What every layer's tests share: the CPU kind a test runs as.

A test whose outcome depends on the CPU's bf16 instructions (the precision a CPU process trains in,
workloads.train.common.cpu_choice) takes ``cpu_bf16`` and asserts what that capability implies, and is marked
``cpu_capability``: ``.ci/run`` runs those once as the machine is and once with ``EKSBENCH_CPU_BF16``
forcing the other kind, so a green CI means green on CPUs with and without bf16 instructions.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cpu_bf16() -> bool:
    """Whether processes started by this test run train as on a CPU with bf16 instructions."""
    from workloads.train.common.cpu_choice import read_cpu_facts

    return read_cpu_facts().native_bf16


@pytest.fixture(scope="session")
def cpu_mixed_precision(cpu_bf16) -> str:
    """What a CPU process trains a mixed-precision experiment (amp-fp16, bf16) in."""
    return "bf16" if cpu_bf16 else "fp32"
