"""The launcher judges NCCL's transport on an EFA pod: sockets mark the run degraded, and
``fabric: strict`` stops it at the first socket line and fails it with an exit code the Job fails on."""

from __future__ import annotations

import json
import sys
import time

from core.catalog.fabric import DEGRADED, FABRIC_EXIT_CODE
from core.contract import summary_fields as F
from core.contract.names import ENV_EFA as EFA_ENV
from core.contract.names import ENV_FABRIC as FABRIC_ENV
from workloads.job_manifests import training_failure_policy
from workloads.train.harness import launch

# What NCCL 2.x prints at init with NCCL_DEBUG=INFO (the launcher's NCCL_NET pattern reads these)
SOCKET_LINE = "ip-10-0-1-2:42:42 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.1.2<0>"
OFI_LINE = "ip-10-0-1-2:42:42 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.14.0"


def run_launcher(tmp_path, line: str, *, mode: str, efa: bool = True, sleep: float = 0.0):
    code = f"print({line!r}, flush=True); import time; time.sleep({sleep})"
    environ = {"EKSBENCH_FRAMEWORK": "pytorch", FABRIC_ENV: mode, **({EFA_ENV: "1"} if efa else {})}
    started = time.monotonic()
    rc = launch.main(["--results-dir", str(tmp_path), "--node-id", "node-0", "--summary", "always", "--grace", "5",
                      "--", sys.executable, "-c", code], environ)
    return rc, json.loads((tmp_path / "summary.json").read_text()), time.monotonic() - started


def test_sockets_on_an_efa_pod_mark_the_run_degraded(tmp_path):
    rc, s, _ = run_launcher(tmp_path, SOCKET_LINE, mode="check")
    assert rc == 0 and s["status"] == "succeeded"
    assert s["nccl_transport"] == "NET/Socket"
    assert s["fabric"] == {"mode": "check", "efa_expected": True, "transport": "NET/Socket", "verdict": DEGRADED}
    assert s["flags"] == [DEGRADED]


def test_strict_stops_the_run_at_the_first_socket_line_and_fails_it(tmp_path):
    rc, s, took = run_launcher(tmp_path, SOCKET_LINE, mode="strict", sleep=120)
    assert rc == FABRIC_EXIT_CODE and s["status"] == "failed" and s["exit_code"] == FABRIC_EXIT_CODE
    assert took < 60, f"the command ran on for {took:.0f}s after NCCL chose sockets"
    assert s["signal"] == "SIGTERM"
    assert s["error"].startswith("fabric: strict: degraded (NCCL on sockets) where EFA (NET/OFI) was expected")
    assert s["flags"] == [DEGRADED]


def test_efa_passes_strict(tmp_path):
    rc, s, _ = run_launcher(tmp_path, OFI_LINE, mode="strict")
    assert rc == 0 and s["status"] == "succeeded" and s["fabric"]["verdict"] == "EFA (NET/OFI)" and s["flags"] == []


def test_a_pod_without_efa_is_not_judged_even_under_strict(tmp_path):
    rc, s, _ = run_launcher(tmp_path, SOCKET_LINE, mode="strict", efa=False)
    assert rc == 0 and s["status"] == "succeeded" and s["fabric"]["verdict"].startswith("not checked")


def test_the_job_fails_at_once_on_the_fabric_and_diverged_exit_codes_and_still_ignores_disruptions():
    rules = training_failure_policy()["rules"]
    assert rules[0]["action"] == "Ignore"
    assert rules[1] == {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                             "values": [FABRIC_EXIT_CODE, F.DIVERGED_EXIT_CODE,
                                                                        F.NO_STEPS_EXIT_CODE]}}
