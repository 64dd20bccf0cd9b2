"""How a run on CPUs trains: memory format and precision by what this CPU does well, not by a GPU's rules.

The cluster's experiments ask for what suits a GPU: ``amp-fp16`` and ``channels_last`` (the
tensor-core layout). On a CPU both can cost an order of magnitude or worse:

- bf16 autocast is fast only where the CPU has bf16 instructions (AVX-512 BF16, AMX). On a
  2-core AMD EPYC with AVX2 and no AVX-512, one ResNet-50 training step (width 16, 64 px,
  batch 8, one thread) took 3.10 s in bf16 and 0.225 s in fp32 (14x); fp16 autocast is slower
  still. So mixed precision is fp32 on a CPU without bf16 instructions.
- With them, bf16 is not always the faster: on a 2-core AMD EPYC with AVX-512 BF16 the local
  ResNet-50 trained 1.3-1.8x faster in bf16, on an Intel Xeon with AMX more slowly (30 steps:
  6.9 s in bf16, 5.7 s in fp32). Where a measurement of the model on this CPU is at hand
  (``CpuFacts.measured``: ``bench run --local`` times a few steps of each and keeps the answer,
  ``bench/local/precision_probe.py``), mixed precision is the faster of the two; without one, bf16.
- channels_last buys little on a CPU, and with torch 2.14.1 on that AVX2 machine a narrow
  ResNet's backward in channels_last segfaulted with one thread and hung with two, where the
  contiguous step took 0.02 s. So CPU runs train in the contiguous format.

``choose`` is pure (the CPU's facts are passed in); ``read_cpu_facts`` reads them from
``/proc/cpuinfo`` without importing torch, so ``bench run --local`` can decide before it starts
any process. The trainer records torch's own view (``torch.backends.cpu.get_cpu_capability()``)
beside the choice in the summary.

``EKSBENCH_CPU_BF16=1`` (or ``0``) makes ``read_cpu_facts`` answer as a CPU with (without) bf16
instructions, whatever this one has, in this process and every process it starts: the tests use
it to check both kinds of CPU on one machine (``.ci/run``). Forced bf16 on a CPU without the
instructions is correct, only slow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from core.contract.names import ENV_CPU_BF16

# x86 flags (Linux /proc/cpuinfo names) whose presence makes bf16 matmuls and convolutions native
# (oneDNN uses AVX512_BF16 on Cooper Lake / Zen 4 and later, AMX on Sapphire Rapids and later).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
MIXED = ("amp-fp16", "bf16", "fp8")  # fp8: float8 tensor cores (H100/H200), a mixed precision a CPU replaces too
FORCE_BF16_ENV = ENV_CPU_BF16  # "1": answer as a CPU with bf16 instructions, "0": as one without
FORCED_FLAG = "avx512_bf16"  # the flag a forced "1" adds


@dataclass(frozen=True)
class Measured:
    """Seconds per training step of one model on this CPU, in fp32 and in bf16 autocast (median of a few)."""
    fp32_s: float
    bf16_s: float
    # bf16 must beat fp32 by this share to be chosen: a tie keeps fp32, the precise one
    MARGIN = 0.05

    @property
    def bf16_faster(self) -> bool:
        return self.bf16_s < self.fp32_s * (1 - self.MARGIN)

    def describe(self) -> str:
        return f"measured {self.bf16_s * 1e3:.0f} ms/step in bf16, {self.fp32_s * 1e3:.0f} in fp32"


@dataclass(frozen=True)
class CpuFacts:
    """What the CPU offers, as Linux names its flags (``/proc/cpuinfo``); empty where unknown."""
    flags: frozenset[str] = frozenset()
    model: str = ""
    forced: str = ""  # how FORCE_BF16_ENV changed the flags read, for describe(); "" when it did not
    measured: Measured | None = None  # the model at hand timed on this CPU in both precisions, where it was

    @property
    def native_bf16(self) -> bool:
        return bool(BF16_FLAGS & self.flags)

    def describe(self) -> str:
        isa = "AMX" if "amx_bf16" in self.flags else "AVX-512 BF16" if "avx512_bf16" in self.flags else None
        vec = "AVX-512" if "avx512f" in self.flags else "AVX2" if "avx2" in self.flags else "no AVX2"
        return (f"{self.model or 'CPU'} ({vec}, " + (f"bf16 via {isa}" if isa else "no bf16 instructions")
                + (f", {self.forced}" if self.forced else "") + ")")


def forced(facts: CpuFacts, value: str | None) -> CpuFacts:
    """``facts`` as ``FORCE_BF16_ENV=value`` has them: unchanged for None or "", bf16 instructions added
    for "1", taken away for "0"; any other value is a ValueError naming the variable, the value and the choices."""
    if value in (None, ""):
        return facts
    if value not in ("0", "1"):
        raise ValueError(f"{FORCE_BF16_ENV}={value!r}: use 1 (train as on a CPU with bf16 instructions), "
                         "0 (as on one without), or leave it unset (as this CPU is)")
    flags = facts.flags | {FORCED_FLAG} if value == "1" else facts.flags - BF16_FLAGS
    return replace(facts, flags=flags, forced=f"bf16 instructions {'forced' if value == '1' else 'hidden'} "
                                              f"by {FORCE_BF16_ENV}={value}")


@dataclass(frozen=True)
class CpuChoice:
    precision: str
    channels_last: bool
    why: tuple[str, ...]  # one line per change from what the experiment asked for


def channels_last_for(device_type: str, requested: bool) -> bool:
    """Whether to train in channels_last: as asked on an accelerator, never on a CPU (module docstring)."""
    return requested and device_type != "cpu"


def precision_on(device_type: str, requested: str) -> str:
    """The precision a process on ``device_type`` trains in: as asked on an accelerator, this CPU's choice on a CPU."""
    return requested if device_type != "cpu" else choose(requested, False, read_cpu_facts()).precision


def choose(precision: str, channels_last: bool, facts: CpuFacts) -> CpuChoice:
    """The fastest precision the experiment allows on this CPU, and the CPU's memory format."""
    why = []
    chosen = precision
    if precision in MIXED:
        measured = facts.measured if facts.native_bf16 and not facts.forced else None
        chosen = "bf16" if facts.native_bf16 and (measured is None or measured.bf16_faster) else "fp32"
        if chosen != precision:
            if not facts.native_bf16:
                reason = "no bf16 instructions: bf16/fp16 autocast is many times slower than fp32"
            elif measured is None:
                reason = "bf16 instructions make bf16 the fast mixed precision"
            else:
                reason = f"the faster here ({measured.describe()})"
            why.append(f"{precision} -> {chosen} on {facts.describe()}: {reason}")
    fmt = channels_last_for("cpu", channels_last)
    if channels_last and not fmt:
        why.append("channels_last -> contiguous: a GPU tensor-core layout, slow or broken in CPU backward passes")
    return CpuChoice(precision=chosen, channels_last=fmt, why=tuple(why))


def parse_cpuinfo(text: str) -> CpuFacts:
    """The first processor's flags and model name from ``/proc/cpuinfo`` text (x86 ``flags``, Arm ``Features``)."""
    flags: frozenset[str] = frozenset()
    model = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
        elif key == "model name" and not model:
            model = value.strip()
    return CpuFacts(flags=flags, model=model)


def read_cpu_facts(path: Path = Path("/proc/cpuinfo"), environ: Mapping[str, str] | None = None) -> CpuFacts:
    """This machine's facts, as ``FORCE_BF16_ENV`` in ``environ`` (default: this process's) leaves them;
    no flags (so: fp32) where the file cannot be read (not Linux)."""
    try:
        facts = parse_cpuinfo(path.read_text(errors="replace"))
    except OSError:
        facts = CpuFacts()
    return forced(facts, (os.environ if environ is None else environ).get(FORCE_BF16_ENV))
