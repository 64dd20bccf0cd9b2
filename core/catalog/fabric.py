"""What a node group's fabric should deliver, and whether a run's NCCL used it.

Two plain facts, no I/O:

- ``EXPECTED_BUSBW``: published all-reduce bus bandwidth per instance type and node count, each
  with its source. A run whose peak bus bandwidth falls below ``BELOW_FRACTION`` of the figure,
  compared at the largest message size both measured, is flagged (``busbw_check``).
- ``fabric_verdict``: on an EFA group, NCCL should run over aws-ofi-nccl (``NET/OFI``); NCCL that
  fell back to TCP (``NET/Socket``) delivers a small fraction of the bandwidth and is not an error
  to NCCL, only a line in its INIT log. Mode ``check`` marks such a run degraded; ``strict``
  fails it.

Bus bandwidth is nccl-tests' (NVIDIA/nccl-tests doc/PERFORMANCE.md, "Bus bandwidth", AllReduce):
``busbw = algbw x 2(n-1)/n`` with ``algbw = S / t``, S the message size in bytes and GB = 1e9 bytes
(src/common.cu ``getBw``: ``(count * typesize) / 1.0E9 / sec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

FABRIC_MODES = ("check", "strict")
EFA_TRANSPORT = "NET/OFI"  # aws-ofi-nccl, NCCL's network plugin for EFA
SOCKETS = "NET/Socket"
DEGRADED = "degraded (NCCL on sockets)"
# Below this share of the published figure a run is flagged. Run-to-run spread alone is about 10%:
# one driver update moved all-reduce busbw from 362 to 328 GB/s (NVIDIA/nccl-tests#297), and
# 64 MiB figures vary between runs (NVIDIA/nccl#1469); 0.8 flags what that spread does not explain.
BELOW_FRACTION = 0.8


def bus_bandwidth(algbw: float, world_size: int) -> float:
    """nccl-tests' AllReduce bus bandwidth: ``algbw x 2(n-1)/n`` (0 for a single rank)."""
    return algbw * 2 * (world_size - 1) / world_size


@dataclass(frozen=True)
class ExpectedBusbw:
    """Published all-reduce busbw (GB/s) at message sizes (bytes), out-of-place column, float sum."""
    points: tuple[tuple[int, float], ...]  # (bytes, busbw GB/s), ascending bytes
    source: str


AWSOME_NCCL_TESTS = ("aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md "
                     "(commit 7217859f, all_reduce_perf -b 8 -f 2, out-of-place busbw)")
# (instance type, nodes) -> figure. Only pairs with a published run; no figure, no flag.
EXPECTED_BUSBW: dict[tuple[str, int], ExpectedBusbw] = {
    ("p4de.24xlarge", 2): ExpectedBusbw(points=((2**29, 74.28), (2**30, 76.79), (2**31, 78.33)),
                                        source="2 x p4de.24xlarge, " + AWSOME_NCCL_TESTS),
    ("p5.48xlarge", 2): ExpectedBusbw(points=((2**29, 393.34), (2**30, 436.95), (2**31, 443.72),
                                              (2**32, 465.87), (2**33, 479.28)),
                                      source="2 x p5.48xlarge, the README's Slurm run (its versions unstated; the "
                                             "repository's defaults then: EFA installer 1.31.0, aws-ofi-nccl 1.8.1, "
                                             "NCCL 2.20.3; NCCL_BUFFSIZE=8388608, NCCL_P2P_NET_CHUNKSIZE=524288), "
                                             + AWSOME_NCCL_TESTS),
}


# AWS's own recipe for EFA pods, aws-samples/awsome-distributed-training
# micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml (commit 7217859f, its defaults are for p5.48xlarge;
# the EKS user guide's ml/node-efa.adoc has the same resources):
# - huge pages: "hugepages-2Mi: 5120Mi" for a pod with all 8 GPUs and 32 EFA interfaces. libfabric's EFA
#   provider maps its buffer pools with MAP_HUGETLB (ofiwg/libfabric efa_rdm_ep_fiops.c), EFA instances
#   pre-allocate 5128 2 MiB pages (EKS user guide), and the kubelet limits hugetlb to 0 for every page size a
#   pod does not request (kubernetes pkg/kubelet/cm/cgroup_manager_linux.go maybeSetHugetlb): without the
#   request libfabric falls back to normal pages (runc >= 1.2 also limits reservations) or dies of SIGBUS.
#   A pod with part of a node's GPUs gets the same share of the 5120 MiB.
# - NCCL on p5: NCCL_BUFFSIZE=8388608 and NCCL_P2P_NET_CHUNKSIZE=524288 (the manifest's mpirun -x settings,
#   and the settings of the README's published p5 figure above). Its NCCL_TUNER_PLUGIN path is not set
#   here: aws-ofi-nccl 1.16 enables its tuner by default on AWS (its RELEASENOTES), the plugin's library
#   layout differs across EFA installers, and NCCL only logs a wrong path and goes on.
EFA_HUGEPAGES_MIB_PER_NODE = 5120
EFA_RECIPE = "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml (7217859f)"
NCCL_ENV_BY_FAMILY: dict[str, dict[str, str]] = {
    family: {"NCCL_BUFFSIZE": "8388608", "NCCL_P2P_NET_CHUNKSIZE": "524288"} for family in ("p5", "p5e", "p5en")}


def efa_hugepages_mib(gpus: int, node_gpus: int) -> int:
    """MiB of 2 MiB huge pages for a pod with ``gpus`` of a node's ``node_gpus``: its share of the recipe's
    5120 MiB, in whole pages."""
    share = EFA_HUGEPAGES_MIB_PER_NODE * max(gpus, 1) // max(node_gpus, 1)
    return max(2, share - share % 2)


def busbw_check(curve: Sequence[tuple[int, float]], *, instance_type: str | None, nodes: int | None,
                fraction: float = BELOW_FRACTION) -> dict:
    """Measured ``curve`` ((bytes, busbw GB/s), any order) against the published figure.

    Compared at the largest message size both have; ``below`` is None where there is no figure
    or no common size (the note says which)."""
    expected = EXPECTED_BUSBW.get((instance_type or "", nodes or 0))
    out = {"expected_gbps": None, "compared_at_bytes": None, "measured_gbps": None, "fraction": None,
           "below": None, "source": None}
    if expected is None:
        out["note"] = f"no published all-reduce figure for {nodes} x {instance_type} (core/catalog/fabric.py)"
        return out
    measured = dict(curve)
    common = [b for b, _ in expected.points if b in measured]
    if not common:
        sizes = ", ".join(str(b) for b, _ in expected.points)
        out.update(source=expected.source, note=f"no measured size matches the published ones ({sizes} B)")
        return out
    at = max(common)
    want = dict(expected.points)[at]
    got = measured[at]
    out.update(expected_gbps=want, compared_at_bytes=at, measured_gbps=got, fraction=round(got / want, 4),
               below=got < fraction * want, source=expected.source,
               note=f"{got:.4g} GB/s at {at} B is {got / want:.0%} of the published {want:.4g} GB/s "
                    f"(flagged below {fraction:.0%})")
    return out


def below_expected_flag(check: dict) -> str | None:
    """The flag a run below its published figure carries, None otherwise."""
    if not check.get("below"):
        return None
    return (f"busbw below expected ({check['measured_gbps']:.4g} of {check['expected_gbps']:.4g} GB/s "
            f"at {check['compared_at_bytes']} B)")


NOT_CHECKED = "not checked"  # a verdict's opening words where nothing was judged


@dataclass(frozen=True)
class FabricVerdict:
    verdict: str  # "EFA (NET/OFI)", DEGRADED, "unverified (...)" or "not checked (...)"
    flag: str | None  # what the run is marked with (None: nothing to mark)
    fails: bool  # fabric: strict and EFA not shown


def fabric_verdict(transport: str | Sequence[str] | None, *, efa_expected: bool, framework: str | None,
                   mode: str = "check") -> FabricVerdict:
    """Judge the NCCL transport(s) a run's logs named (``workloads.train.harness.collect.nccl_transport``).

    Only PyTorch experiments on an EFA group are judged. Any node on ``NET/Socket`` is degraded; a
    run with no NCCL INIT line cannot show it used EFA, which ``strict`` also fails.
    """
    if not efa_expected:
        return FabricVerdict(f"{NOT_CHECKED} (no EFA on the node group)", None, False)
    if framework != "pytorch":
        return FabricVerdict(f"{NOT_CHECKED} (framework {framework})", None, False)
    strict = mode == "strict"
    seen = [transport] if isinstance(transport, str) else list(transport or [])
    if not seen:
        return FabricVerdict("unverified (no NCCL INIT line in the logs)",
                             "fabric unverified (no NCCL INIT line)" if strict else None, strict)
    if SOCKETS in seen:
        return FabricVerdict(DEGRADED, DEGRADED, strict)
    if set(seen) == {EFA_TRANSPORT}:
        return FabricVerdict(f"EFA ({EFA_TRANSPORT})", None, False)
    other = ", ".join(t for t in seen if t != EFA_TRANSPORT)
    return FabricVerdict(f"degraded (NCCL on {other})", f"degraded (NCCL on {other})", strict)


# The pod's environment carries the two facts the launcher judges by (workloads.job_manifests sets
# them): whether the pod was given EFA devices (core.contract.names.ENV_EFA), and the experiment's
# ``fabric`` mode (ENV_FABRIC).
# The launcher's exit code for a run ``fabric: strict`` failed; the Job fails at once on it
# (podFailurePolicy FailJob) instead of retrying on the same fabric.
FABRIC_EXIT_CODE = 86
