"""``python -m workloads.train.control.gate``: the gate Job's program, which orders other Jobs.

A tiny CPU-only Job waits for other Jobs to finish (their Complete or Failed condition) and
then resumes suspended ones by patching ``spec.suspend=false``. A suspended Job has no pods,
so nothing waiting holds a GPU, and its activeDeadlineSeconds only starts on resume ("the
Job's .status.startTime is reset when resumed", Kubernetes docs, Jobs: "Suspending a Job").

Its instructions come as JSON in ``EKSBENCH_GATE`` (``workloads.gate_manifests.gate_spec``). Standard
library only: it runs in a plain Python image (``core.catalog.pins.GATE_IMAGE``) and talks to the API
server with the pod's service-account token.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Callable

from core.contract.names import ENV_GATE

SA = "/var/run/secrets/kubernetes.io/serviceaccount/"
API = "https://kubernetes.default.svc"


def request(path: str, body: dict | None = None, *, api: str = API, sa: str = SA) -> Any:
    """GET ``path`` of the API server, or PATCH it with ``body`` (a JSON merge patch), as the pod's
    service account. Shared with the autostop controller (workloads.train.control.autostop)."""
    with open(sa + "token") as f:  # re-read each time: projected tokens rotate
        token = f.read()
    req = urllib.request.Request(api + path, method="PATCH" if body else "GET",
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/merge-patch+json"})
    ctx = ssl.create_default_context(cafile=sa + "ca.crt") if api.startswith("https:") else None
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return json.load(r)


def call(spec: dict, name: str, body: dict | None = None) -> Any:
    """GET the Job ``name``, or PATCH it with ``body`` (a JSON merge patch)."""
    return request("/apis/batch/v1/namespaces/%s/jobs/%s" % (spec["namespace"], name), body)


def job_state(spec: dict, name: str) -> str:
    """Complete or Failed (the Job's terminal condition), Gone (404), else Running."""
    try:
        job = call(spec, name)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return "Gone"
        raise
    for c in job.get("status", {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return c["type"]
    return "Running"


def run(spec: dict, state: Callable[[str], str], resume: Callable[[str], Any],
        sleep: Callable[[float], Any]) -> list[str]:
    """Wait until every waited Job is done, then resume ``spec["resume"]`` unless a required one Failed."""
    while True:
        try:
            states = {n: state(n) for pair in spec["wait"] for n in pair if n}
        except (OSError, ValueError) as e:
            print("gate: API error, retrying:", e, flush=True)
            sleep(15)
            continue
        pending = [n for n, alt in spec["wait"] if states[n] == "Running" and not (alt and states[alt] == "Failed")]
        if not pending:
            break
        print("gate: waiting for", ", ".join(pending), flush=True)
        sleep(30)
    failed = [n for n in spec["require_success"] if states.get(n) == "Failed"]
    if failed:
        print("gate: %s failed; not starting %s" % (", ".join(failed), ", ".join(spec["resume"])), flush=True)
        return []
    for n in spec["resume"]:
        resume(n)
        print("gate: started", n, flush=True)
    return list(spec["resume"])


def main() -> None:
    spec = json.loads(os.environ[ENV_GATE])
    run(spec, lambda n: job_state(spec, n), lambda n: call(spec, n, {"spec": {"suspend": False}}), time.sleep)


if __name__ == "__main__":
    main()
