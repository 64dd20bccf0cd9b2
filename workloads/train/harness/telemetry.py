"""What the node's hardware did while the command ran: a sampler thread of the launcher, one per node.

Every ``interval`` seconds (1 by default) it reads each GPU of the node through NVML (``pynvml``, from
nvidia-ml-py): SM utilisation, memory used and total, power draw and limit, SM and memory clocks, temperature,
the reasons a clock is held down, and PCIe and NVLink throughput where NVML has them. NVML reads the driver's
counters: it makes no CUDA context, and it runs in the launcher's process, never in the trainer's. Without a
GPU it reads the CPU packages' RAPL energy counters under ``/sys/class/powercap`` where they are readable, and
else records nothing, with the reason.

Each sample is one line of ``telemetry/<node>.jsonl`` (strict JSON), carrying the running totals too (seconds
throttled; energy in joules twice: ``energy_j`` as the power integral, and ``energy_counter_j`` as the difference of
NVML's energy counter since the first sample, where the GPU has one), so the last line a file has gives the run's
totals whatever lines were left out before it. The counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules
since the driver loaded, on Volta and newer) counts every joule; the power reading (``nvmlDeviceGetPowerUsage``) is
instantaneous on GA100 and older (a one-second average only on later GPUs), so 1 Hz samples of it can lock to a
step's compute/all-reduce cycle. Memory is bounded (the sampler keeps one previous sample), and so is the file:
after half of ``max_bytes`` it writes every second sample, after three quarters every fourth, and so on, so a run
of any length stays under ``max_bytes`` and is covered from start to end (``LineBudget``). The launcher's summary
node turns the files into summary.json's ``telemetry`` block (``workloads.train.harness.telemetry_summary``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from core.contract import strict_json
from core.contract.names import node_telemetry

POWERCAP = Path("/sys/class/powercap")
# Under the readers' 64 MiB bound for one lines file (bench.results.readers.MAX_LINES_BYTES), with room to spare.
MAX_BYTES = 32 * 1024 * 1024
# nvml.h ``nvmlClocksThrottleReason*`` (renamed ``nvmlClocksEventReason*`` in NVML 12.2, same bits): the reasons that
# hold a clock below what the work asked for. GpuIdle (0x1), ApplicationsClocksSetting (0x2), SyncBoost (0x10) and
# DisplayClockSetting (0x100) are not throttling and are left out.
THROTTLE_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                    0x80: "hw_power_brake"}
# nvml.h field ids ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`` / ``_RX``: KiB sent and received over every link, counters.
NVLINK_FIELDS = {"nvlink_tx_kib": 138, "nvlink_rx_kib": 139}
NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1  # nvml.h nvmlPcieUtilCounter_t: KB/s over 20 ms
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2  # nvml.h nvmlClockType_t
NVML_TEMPERATURE_GPU = 0  # nvml.h nvmlTemperatureSensors_t
COUNTER_MJ = "energy_mj"  # in a GPU's reading: NVML's energy counter, millijoules since the driver loaded
ENERGY_COUNTER_J = "energy_counter_j"  # in a GPU's line: joules the counter counted since the sampler's first reading


def _maybe(call: Callable[..., Any], *args: Any) -> Any:
    """NVML's answer, or None where this GPU or driver has no such reading (NVMLError_NotSupported and kin)."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - pynvml raises one NVMLError subclass per nvmlReturn_t
        return None


def throttle_names(mask: Any) -> list[str]:
    """The throttling reasons set in NVML's bit mask (``THROTTLE_REASONS``), in bit order."""
    return [name for bit, name in THROTTLE_REASONS.items() if isinstance(mask, int) and mask & bit]


class NvmlSource:
    """Each GPU of the node through an initialised ``pynvml`` module (or a stand-in with its functions)."""

    kind = "nvml"

    def __init__(self, nvml: Any):
        self.nvml = nvml
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    def read(self) -> dict[str, Any]:
        return {"gpus": [self._gpu(i, h) for i, h in enumerate(self.handles)]}

    def _gpu(self, index: int, h: Any) -> dict[str, Any]:
        n = self.nvml
        util = _maybe(n.nvmlDeviceGetUtilizationRates, h)
        memory = _maybe(n.nvmlDeviceGetMemoryInfo, h)
        power_mw = _maybe(n.nvmlDeviceGetPowerUsage, h)
        limit_mw = _maybe(n.nvmlDeviceGetEnforcedPowerLimit, h)
        reasons = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)  # NVML 12.2's name for the same call
                   or n.nvmlDeviceGetCurrentClocksThrottleReasons)
        gpu = {"index": index, "util_pct": getattr(util, "gpu", None),
               "mem_used_bytes": getattr(memory, "used", None), "mem_total_bytes": getattr(memory, "total", None),
               "power_w": power_mw / 1000 if isinstance(power_mw, (int, float)) else None,
               "power_limit_w": limit_mw / 1000 if isinstance(limit_mw, (int, float)) else None,
               "sm_clock_mhz": _maybe(n.nvmlDeviceGetClockInfo, h, NVML_CLOCK_SM),
               "mem_clock_mhz": _maybe(n.nvmlDeviceGetClockInfo, h, NVML_CLOCK_MEM),
               "temperature_c": _maybe(n.nvmlDeviceGetTemperature, h, NVML_TEMPERATURE_GPU),
               "throttle": throttle_names(_maybe(reasons, h)),
               "pcie_tx_kbps": _maybe(n.nvmlDeviceGetPcieThroughput, h, NVML_PCIE_UTIL_TX_BYTES),
               "pcie_rx_kbps": _maybe(n.nvmlDeviceGetPcieThroughput, h, NVML_PCIE_UTIL_RX_BYTES),
               # None before Volta (NVMLError_NotSupported) or from a pynvml without the call: the power integral
               COUNTER_MJ: _maybe(lambda: n.nvmlDeviceGetTotalEnergyConsumption(h))}
        gpu.update(self._nvlink(h))
        return gpu

    def _nvlink(self, h: Any) -> dict[str, Any]:
        """NVLink's data counters where the GPU has links and NVML reads them (``nvmlDeviceGetFieldValues``)."""
        values = _maybe(self.nvml.nvmlDeviceGetFieldValues, h, list(NVLINK_FIELDS.values()))
        out = {}
        for name, value in zip(NVLINK_FIELDS, values or ()):
            if getattr(value, "nvmlReturn", 1) == 0:
                out[name] = getattr(value.value, "ullVal", None)
        return out

    def close(self) -> None:
        _maybe(self.nvml.nvmlShutdown)


class RaplSource:
    """The CPU packages' energy counters (``intel-rapl:<n>/energy_uj``, microjoules, wrapping at
    ``max_energy_range_uj``; Linux's powercap framework, which also serves AMD's RAPL under the same names)."""

    kind = "rapl"

    def __init__(self, zones: list[Path]):
        self.zones = zones
        self.ranges = [_read_int(z / "max_energy_range_uj") or 0 for z in zones]
        self.last = [_read_int(z / "energy_uj") for z in zones]
        self.joules = 0.0

    def read(self) -> dict[str, Any]:
        for i, zone in enumerate(self.zones):
            now = _read_int(zone / "energy_uj")
            if now is None or self.last[i] is None:
                continue
            delta = now - self.last[i]
            if delta < 0:  # the counter wrapped
                delta += self.ranges[i]
            self.joules += max(delta, 0) / 1e6
            self.last[i] = now
        return {"cpu": {"energy_j": round(self.joules, 3)}}

    def close(self) -> None:
        pass


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def rapl_zones(powercap: Path = POWERCAP) -> tuple[list[Path], str | None]:
    """The package zones (``intel-rapl:0``, not their ``intel-rapl:0:0`` sub-zones, which they already count) whose
    counter this process can read, or why none."""
    zones = sorted(p for p in powercap.glob("intel-rapl:*") if p.name.count(":") == 1) if powercap.is_dir() else []
    if not zones:
        return [], f"no RAPL energy counter under {powercap}"
    readable = [z for z in zones if _read_int(z / "energy_uj") is not None]
    if not readable:
        return [], f"{zones[0] / 'energy_uj'} is not readable (root only on Linux 5.10 and later)"
    return readable, None


def open_source(nvml: Any = None, powercap: Path = POWERCAP) -> tuple[Any, str | None]:
    """(the node's source, or None; why there is no GPU telemetry, or None where NVML sees GPUs).

    ``nvml``: the pynvml module (imported here when None; the tests give a stand-in)."""
    why = None
    try:
        if nvml is None:
            import pynvml as nvml  # nvidia-ml-py: the CUDA images carry it, else the pod installs it
        nvml.nvmlInit()
        if nvml.nvmlDeviceGetCount() > 0:
            return NvmlSource(nvml), None
        nvml.nvmlShutdown()
        why = "NVML sees no GPU"
    except ImportError:
        why = "pynvml (nvidia-ml-py) is not installed"
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: a machine without GPUs
        why = f"NVML: {e or type(e).__name__}"
    zones, no_rapl = rapl_zones(powercap)
    if zones:
        return RaplSource(zones), f"no GPU telemetry on this run ({why})"
    return None, f"no GPU telemetry on this run ({why}); no CPU energy either: {no_rapl}"


class Counted:
    """Each GPU's joules by NVML's energy counter since its first reading, while the counter holds: from the first
    reading without a count (not supported, failed) or with a count below the one before (a reset), the GPU has
    none for the rest of the sampler's life, and the summary takes the power integral."""

    def __init__(self) -> None:
        self.first: dict[int, float | None] = {}
        self.last: dict[int, float | None] = {}

    def add(self, index: int, mj: Any) -> float | None:
        """The GPU's joules so far with this reading (``mj``: the counter, millijoules), or None."""
        count = mj if isinstance(mj, (int, float)) and not isinstance(mj, bool) and mj >= 0 else None
        if index not in self.first:
            self.first[index] = self.last[index] = count
        else:
            last = self.last[index]
            self.last[index] = count if count is not None and last is not None and count >= last else None
        last, first = self.last[index], self.first[index]
        return (last - first) / 1000 if last is not None and first is not None else None


class Totals:
    """The running totals each line carries: per GPU (or for the CPU) the power integral and the seconds
    throttled, from one sample to the next (the trapezoid rule; power held for the first interval), and each GPU's
    energy by its counter (``Counted``)."""

    def __init__(self) -> None:
        self.previous: dict[str, Any] | None = None
        self.energy: dict[int, float] = {}
        self.throttled: dict[int, float] = {}
        self.counted = Counted()

    def add(self, t: float, reading: Mapping[str, Any]) -> dict[str, Any]:
        dt = t - self.previous["t"] if self.previous else 0.0
        before = {g["index"]: g for g in (self.previous or {}).get("gpus", ())}
        gpus = []
        for g in reading.get("gpus", ()):
            g = dict(g)
            i, old = g["index"], before.get(g["index"], {})
            counted = self.counted.add(i, g.pop(COUNTER_MJ, None))
            watts = [w for w in (g.get("power_w"), old.get("power_w")) if isinstance(w, (int, float))]
            self.energy[i] = self.energy.get(i, 0.0) + (sum(watts) / len(watts) * dt if watts else 0.0)
            self.throttled[i] = self.throttled.get(i, 0.0) + (dt if g.get("throttle") else 0.0)
            gpus.append({**g, "energy_j": round(self.energy[i], 3), "throttled_s": round(self.throttled[i], 3)})
            if counted is not None:
                gpus[-1][ENERGY_COUNTER_J] = round(counted, 3)
        line: dict[str, Any] = {"t": round(t, 3)}
        if gpus:
            line["gpus"] = gpus
        if "cpu" in reading:
            cpu = dict(reading["cpu"])
            last = (self.previous or {}).get("cpu", {}).get("energy_j")
            cpu["power_w"] = round((cpu["energy_j"] - last) / dt, 3) if dt > 0 and last is not None else None
            line["cpu"] = cpu
        self.previous = line
        return line


class LineBudget:
    """Which lines to write so a file of any run stays under ``max_bytes``: every line until half of it is
    written, then every 2nd until three quarters, every 4th until seven eighths, ... (the last line always)."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.written, self.threshold, self.left = 0, max_bytes // 2, max_bytes // 2
        self.stride, self.seen = 1, 0

    def take(self, size: int, *, last: bool = False) -> bool:
        self.seen += 1
        if not last and (self.seen - 1) % self.stride:
            return False
        self.written += size
        while self.written >= self.threshold and self.left > 1:
            self.left //= 2
            self.threshold += self.left
            self.stride *= 2
        return True


class Sampler:
    """A daemon thread writing a sample of ``source`` to ``<results>/telemetry/<node>.jsonl`` every ``interval``
    seconds from ``start`` to ``stop`` (which takes a last sample). No source: nothing runs, and ``reason`` says
    why. Writing never fails the run: the first OSError ends the file, with the reason kept."""

    def __init__(self, results_dir: Path | None, node_id: str, *, source: Any, reason: str | None,
                 interval: float = 1.0, max_bytes: int = MAX_BYTES, clock: Callable[[], float] = time.time):
        self.path = Path(results_dir) / node_telemetry(node_id) if results_dir is not None else None
        self.source, self.reason, self.interval, self.clock = source, reason, interval, clock
        self.kind: str | None = getattr(source, "kind", None)  # "nvml", "rapl" or None: kept after the source closes
        self.totals, self.budget = Totals(), LineBudget(max_bytes)
        self._file: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry-sampler", daemon=True)

    @classmethod
    def open(cls, results_dir: Path | None, node_id: str, **kwargs: Any) -> "Sampler":
        """The node's sampler, started: its source as ``open_source`` finds it."""
        nvml, powercap = kwargs.pop("nvml", None), kwargs.pop("powercap", POWERCAP)
        source, reason = open_source(nvml, powercap)
        return cls(results_dir, node_id, source=source, reason=reason, **kwargs).start()

    def start(self) -> "Sampler":
        if self.source is not None and self.path is None:  # no results folder could be written: nowhere to sample to
            self._end(f"no telemetry: no results folder to write {node_telemetry('<node>')} to")
        if self.source is not None and self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "ab", buffering=0)
            except OSError as e:
                self._end(f"cannot write {self.path}: {e}")
                return self
            self.sample()
            self._thread.start()
        return self

    def sample(self, *, last: bool = False) -> None:
        """One reading of the source, as a line (when the budget takes it)."""
        if self._file is None:
            return
        try:
            line = self.totals.add(self.clock(), self.source.read())
        except Exception as e:  # noqa: BLE001 - a source that stops answering ends the file, never the run
            self._end(f"the {self.source.kind} source failed: {type(e).__name__}: {e}")
            return
        data = (strict_json.dumps(line, separators=(",", ":")) + "\n").encode()
        if self.budget.take(len(data), last=last):
            try:
                self._file.write(data)
            except OSError as e:
                self._end(f"cannot write {self.path}: {e}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """Stops the thread, takes the last sample and closes the file and the source."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.sample(last=True)
        self._end(self.reason)

    def _end(self, reason: str | None) -> None:
        self.reason = reason
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
        if self.source is not None:
            self.source.close()
            self.source = None
