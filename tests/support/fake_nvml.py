"""A stand-in for the ``pynvml`` module (nvidia-ml-py) as far as the telemetry sampler asks it.

Shapes from nvidia-ml-py 13.615.71's ``pynvml.py``: ``nvmlDeviceGetUtilizationRates`` returns a
``c_nvmlUtilization_t`` (``gpu``, ``memory`` in percent), ``nvmlDeviceGetMemoryInfo`` a ``c_nvmlMemory_t``
(``total``, ``free``, ``used`` in bytes), power in milliwatts, clocks in MHz, the throttle reasons as the bit mask
``nvmlClocksThrottleReason*``, PCIe throughput in KB/s, and ``nvmlDeviceGetFieldValues`` an array of
``c_nvmlFieldValue_t`` (``nvmlReturn``, ``value.ullVal``). Any other function is an AttributeError naming it, so a
sampler that asks for more than this answers fails loudly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable


class NVMLError(Exception):
    """pynvml's exception base: ``str()`` is NVML's message (``nvmlErrorString``)."""


class NotSupported(NVMLError):
    def __str__(self) -> str:
        return "Not Supported"


@dataclass
class FakeGpu:
    """What one GPU answers; ``util`` may be a function of the call count (a run that starts idle, then works)."""

    util: int | Callable[[int], int] = 90
    used: int = 40 * 2**30
    total: int = 80 * 2**30
    power_mw: int = 500_000
    limit_mw: int = 700_000
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    temperature: int = 60
    throttle: int = 0
    pcie: bool = True
    nvlink: bool = True
    calls: int = field(default=0)


class FakeNvml:
    """The module: ``FakeNvml([FakeGpu(), ...])``; ``fail_init``: nvmlInit raises it (no driver)."""

    def __init__(self, gpus: list[FakeGpu], fail_init: Exception | None = None):
        self.gpus, self.fail_init, self.initialised = gpus, fail_init, 0

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake pynvml has no {name}: add it to tests/support/fake_nvml.py from pynvml.py")

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.fail_init
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        assert self.initialised > 0, "nvmlInit first"
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        return self.gpus[i]

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        h.calls += 1
        util = h.util(h.calls) if callable(h.util) else h.util
        return SimpleNamespace(gpu=util, memory=util // 2)

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        return SimpleNamespace(total=h.total, free=h.total - h.used, used=h.used)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        return h.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        return h.limit_mw

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, kind: int) -> int:
        return {1: h.sm_mhz, 2: h.mem_mhz}[kind]  # NVML_CLOCK_SM, NVML_CLOCK_MEM

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        assert sensor == 0  # NVML_TEMPERATURE_GPU
        return h.temperature

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeGpu) -> int:
        return h.throttle

    def nvmlDeviceGetPcieThroughput(self, h: FakeGpu, counter: int) -> int:
        if not h.pcie:
            raise NotSupported()
        return 1000 + counter

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, ids: list[int]) -> list[Any]:
        return [SimpleNamespace(fieldId=i, nvmlReturn=0 if h.nvlink else 3, value=SimpleNamespace(ullVal=7 * i))
                for i in ids]
