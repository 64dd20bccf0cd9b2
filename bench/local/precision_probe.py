"""Which precision a local run trains each PyTorch model in, measured on this CPU once and kept.

A CPU with bf16 instructions may still train a given model faster in fp32 (``workloads.train.common.cpu_choice``).
Before a local run, each model shape it trains with PyTorch that has no answer yet for this CPU and torch is timed in
both precisions (``workloads.train.pytorch.precision_probe``: one process for every shape, a few seconds), and the
answers are kept in ``<cache>/cpu-precision.json`` (``~/.cache/eksbench``, or ``$EKSBENCH_CACHE``), keyed by the
CPU's model and flags, torch's version, the shape and the threads per process. Not timed: a CPU without bf16
instructions (fp32, many times faster there), a run whose CPU kind ``EKSBENCH_CPU_BF16`` forces (the tests' two
kinds), and models the PyTorch trainer does not build from the registry (those choose by the CPU's flags).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Mapping

from core.contract.names import ENV_CACHE
from workloads.train.common.cpu_choice import CpuFacts, Measured
from workloads.train.common.files import FileTooLarge, NotRegularFile, atomic_write, read_regular

CACHE_FILE = "cpu-precision.json"
MAX_CACHE_BYTES = 1 << 20  # a file larger than this is not ours: it is ignored and rewritten
PROBE_TIMEOUT_S = 300


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(ENV_CACHE) or Path(environ.get("HOME", str(Path.home()))) / ".cache" / "eksbench")


def key(facts: CpuFacts, torch_version: str, shape: str, threads: int) -> str:
    """Names one answer: the CPU (model and its bf16 flags), torch, the model's shape and the threads per process."""
    bf16 = ",".join(sorted(f for f in facts.flags if "bf16" in f))
    return f"{facts.model or 'cpu'} [{bf16}] torch {torch_version} {shape} threads {threads}"


def read_cache(path: Path, say: Callable[[str], None] = print) -> dict[str, dict]:
    """The kept answers; {} where the file is missing or not ours. A file that is not a regular one (a named pipe,
    a link to a device) or is larger than MAX_CACHE_BYTES is never read further (``read_regular``): it is ignored
    with one line, and the answers timed now replace it."""
    try:
        data = json.loads(read_regular(path, MAX_CACHE_BYTES))
    except FileNotFoundError:
        return {}
    except (NotRegularFile, FileTooLarge) as e:
        say(f"warning: ignoring the precision cache {path}: it {e.strerror}")
        return {}
    except (OSError, ValueError, RecursionError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def as_measured(entry: object) -> Measured | None:
    try:
        fp32, bf16 = float(entry["fp32_s"]), float(entry["bf16_s"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return None
    return Measured(fp32_s=fp32, bf16_s=bf16) if fp32 > 0 and bf16 > 0 else None


def write_cache(path: Path, data: Mapping[str, dict]) -> None:
    """Atomically: a run stopped half-way leaves the previous file whole."""
    text = json.dumps(data, indent=1, sort_keys=True).encode()
    atomic_write(path, lambda f: f.write(text))


def run_probe(shapes: list[str], threads: int) -> dict[str, dict]:
    """The probe's answers for ``shapes``, from a child process of this python; {} where it fails."""
    done = subprocess.run([sys.executable, "-m", "workloads.train.pytorch.precision_probe", "--threads", str(threads),
                           *shapes], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                          env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (ValueError, IndexError):
        out = {}
    return out if isinstance(out, dict) else {}


def measured(shapes: Iterable[str], *, facts: CpuFacts, threads: int, environ: Mapping[str, str] = os.environ,
             probe: Callable[[list[str], int], dict[str, dict]] = run_probe,
             say: Callable[[str], None] = print) -> dict[str, Measured]:
    """Each shape's bf16 and fp32 step times on this CPU: kept ones, and the rest timed now (and kept)."""
    wanted = sorted(set(shapes))
    if not wanted or not facts.native_bf16 or facts.forced:
        return {}
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return {}
    path = cache_dir(environ) / CACHE_FILE
    cache = read_cache(path, say)
    found = {s: m for s in wanted if (m := as_measured(cache.get(key(facts, torch_version, s, threads))))}
    missing = [s for s in wanted if s not in found]
    if missing:
        say(f"timing bf16 against fp32 on this CPU for {', '.join(missing)} (once; kept in {path})")
        fresh = {s: m for s, entry in probe(missing, threads).items() if s in missing and (m := as_measured(entry))}
        if len(fresh) < len(missing):
            say(f"warning: could not time {', '.join(s for s in missing if s not in fresh)}: their precision "
                "follows the CPU's flags")
        if fresh:
            cache.update({key(facts, torch_version, s, threads): {"fp32_s": m.fp32_s, "bf16_s": m.bf16_s}
                          for s, m in fresh.items()})
            try:
                write_cache(path, cache)
            except OSError as e:
                say(f"warning: could not keep the timings in {path}: {e.strerror or e}")
        found.update(fresh)
    return found
