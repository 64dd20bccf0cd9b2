"""The device side of a run: per-step times without a host sync, and what hardware ran.

``StepClock`` records one mark per step (a CUDA event on a GPU, the host clock on a CPU) and
turns them into durations when an interval closes; ``device_info`` names the GPU, its count and
driver, and the torch, CUDA, cuDNN and NCCL versions for the summary. torch is imported inside.
"""

from __future__ import annotations

import time
from typing import Any


class StepClock:
    """Each step's duration without a host sync per step: CUDA events on a GPU (read when the
    interval closes, after its sync), the host clock on a CPU (where execution is synchronous)."""

    def __init__(self, device: Any):
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []

    def _mark(self) -> Any:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start(self) -> None:
        self.marks = [self._mark()]

    def step(self) -> None:
        self.marks.append(self._mark())

    def durations(self) -> list[float]:
        pairs = zip(self.marks, self.marks[1:])
        if self.cuda:
            return [round(a.elapsed_time(b) / 1000, 6) for a, b in pairs]
        return [round(b - a, 6) for a, b in pairs]


def nvidia_driver() -> str | None:
    try:
        import pynvml  # nvidia-ml-py, present in the CUDA images torch runs in

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 - no NVML: ask nvidia-smi, else unknown
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def device_info(device: Any, world: int) -> dict[str, Any]:
    """name, count, driver, torch, cuda, cudnn, nccl (peak_memory_gib is added from the lines)."""
    import platform

    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    info = {"name": "cpu", "count": 0, "driver": None, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": cudnn, "nccl": None, "processor": platform.processor() or platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if device.type == "cuda":
        info.update(name=torch.cuda.get_device_name(device), count=world, driver=nvidia_driver(),
                    nccl=".".join(str(v) for v in torch.cuda.nccl.version()))
        del info["processor"], info["cpu_capability"]
    return info
