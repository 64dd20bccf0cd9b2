"""The Job controller's part that reaches the pods, for tests/support/pod_sandbox.py.

From the Job's spec (Kubernetes API batch/v1 JobSpec; "Jobs" concept page): ``parallelism`` pods
start together, an Indexed Job's with ``JOB_COMPLETION_INDEX`` and the hostname ``<job>-<index>``;
a failed pod (``restartPolicy: Never``) is replaced by a new pod of the same index until the
failures exceed ``backoffLimit`` (the controller's back-off delay between them is not modelled);
the Job completes when every index succeeded or a ``successPolicy`` rule is met, and fails at
``activeDeadlineSeconds``; ending the Job terminates the pods still running, each given its
``terminationGracePeriodSeconds`` between SIGTERM and SIGKILL.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter

from tests.support.pod_sandbox import GRACE_DEFAULT, JobResult, Kubelet, Pod


def indexes(text: str) -> set[int]:
    """``"0,2-4"`` -> {0, 2, 3, 4} (successPolicy.rules[].succeededIndexes)."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def policy_met(rules: list[dict], succeeded: set[int], completions: int) -> bool:
    for rule in rules:
        chosen = indexes(rule["succeededIndexes"]) if "succeededIndexes" in rule else set(range(completions))
        count = rule.get("succeededCount")
        if (len(chosen & succeeded) >= int(count)) if count is not None else chosen <= succeeded:
            return True
    return False


def run_job(kubelet: Kubelet, job: dict, *, timeout: float = 600, poll: float = 0.2) -> JobResult:
    """Runs ``job``'s pods to the Job's end; ``timeout`` (s) guards the test, not the Job."""
    name, spec = job["metadata"]["name"], job["spec"]
    pod_spec = spec["template"]["spec"]
    indexed = spec.get("completionMode") == "Indexed"
    completions, parallelism = int(spec.get("completions", 1)), int(spec.get("parallelism", 1))
    backoff = int(spec.get("backoffLimit", 6))
    deadline = spec.get("activeDeadlineSeconds")
    grace = int(pod_spec.get("terminationGracePeriodSeconds", GRACE_DEFAULT))
    rules = (spec.get("successPolicy") or {}).get("rules", [])
    if not indexed and completions != 1:
        raise AssertionError(f"Job {name}: NonIndexed with completions {completions} is not modelled")
    attempts: Counter = Counter()
    pods: list[Pod] = []
    succeeded: set[int] = set()
    failures = 0

    def launch(index: int) -> None:
        attempts[index] += 1
        # A pod's name is its Job's (and index's) with a random suffix (metadata.generateName).
        pod_name = f"{name}-{index}-{secrets.token_hex(3)[:5]}" if indexed else f"{name}-{secrets.token_hex(3)[:5]}"
        hostname = f"{name}-{index}" if indexed else pod_name
        pod = Pod(job=name, name=pod_name, index=index if indexed else None, hostname=hostname, spec=pod_spec,
                  dir=kubelet.world.root / "pods" / pod_name)
        pod.node = kubelet.world.nodes.bind(pod_name, job["spec"]["template"].get("metadata", {}).get("labels", {}), pod_spec)
        pod.dir.mkdir(parents=True)
        pod.thread = threading.Thread(target=kubelet.run_pod, args=(pod,), name=pod_name, daemon=True)
        pods.append(pod)
        pod.thread.start()

    started = time.monotonic()
    for i in range(min(parallelism, completions)):
        launch(i)
    seen: set[str] = set()
    reason = ""
    while not reason:
        time.sleep(poll)
        for pod in list(pods):
            if pod.name in seen or not pod.done:
                continue
            seen.add(pod.name)
            kubelet.world.nodes.release(pod.name)
            index = pod.index or 0
            if pod.phase == "Succeeded":
                succeeded.add(index)
            else:
                failures += 1
                if failures > backoff:
                    reason = "BackoffLimitExceeded"
                elif index not in succeeded:
                    launch(index)
        if reason:
            break
        if rules and policy_met(rules, succeeded, completions):
            reason = "SuccessPolicy"
        elif len(succeeded) >= completions:
            reason = "Complete"
        elif deadline is not None and time.monotonic() - started > int(deadline):
            reason = "DeadlineExceeded"
        elif time.monotonic() - started > timeout:
            reason = "TestTimeout"
    running = [p for p in pods if not p.done]
    stoppers = [threading.Thread(target=kubelet.terminate, args=(p, grace)) for p in running]
    for t in stoppers:
        t.start()
    for t in stoppers:
        t.join()
    for p in pods:
        p.thread.join(timeout=grace + 30)
        kubelet.world.nodes.release(p.name)
    return JobResult(name=name, succeeded=reason in ("Complete", "SuccessPolicy"), reason=reason, pods=pods)
