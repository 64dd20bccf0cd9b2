"""Autostop, part 4 of 4, the controller in its pod: ``python -m workloads.train.control.autostop``.

It scales the GPU node groups to zero once the run is over.

A Deployment of one pod on the system nodes (``workloads/autostop_component.py`` registers it) runs this
loop: list the run's Jobs through the Kubernetes API (the gate's client, ``workloads.train.control.gate``),
ask ``core.config.autostop.decide`` and, when it says so, set every GPU node group's scaling config to
min 0, desired 0 through the EKS API, then write ``autostop.json`` beside the run's results.
A stack whose GPU groups Cluster Autoscaler sizes (``suspend_at_deadline`` in the spec) has those groups
out of ``node_groups``: autostop leaves their sizes alone and, when it decides to stop, suspends the run's
unfinished Jobs instead (``spec.suspend: true``, batch/v1 Job suspension, GA since Kubernetes 1.24: the Job
controller deletes a suspended Job's pods, so their nodes go idle and the autoscaler removes them).
It keeps watching afterwards: a later ``pulumi up --refresh`` that puts the sizes back with
nothing left to run is scaled down again. A later ``pulumi up`` that creates new Jobs (a new run id,
new code or experiments) records a new generation first (``superseded``); from then on this
controller, until its Deployment is replaced, never touches the groups.

Its instructions come as JSON in ``EKSBENCH_AUTOSTOP`` (``workloads.autostop_manifests``):
namespace, run_id, cluster, node_groups, region, bucket, key, deadline_minutes, idle_minutes,
generation and owner (the ConfigMap that names the current generation), suspend_at_deadline,
sizes (each GPU group's configured scaling config, which ``restore`` puts back when the run's Jobs wait on a
group at zero).
Its AWS identity is EKS Pod Identity, which boto3 reads from the environment the agent injects.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import urllib.error
import urllib.parse
from typing import Any, Callable, Sequence

from core.config.autostop import SCALE, Decision, decide, job_state
from core.contract import strict_json
from core.contract.names import ENV_AUTOSTOP, RUN_ID_LABEL
from workloads.train.control.gate import request

POLL_SECONDS = 30
# Jobs one list request returns at most, and the requests one look makes at most: a run of 1,024 runs has over 2,000
# Jobs (training and gate), tens of MB of JSON in one answer, where the controller has 256 MiB.
JOBS_PAGE = 100
MAX_PAGES = 1000


def list_jobs(spec: dict, get: Callable[[str], Any] = request) -> list[dict]:
    """The run's Jobs, each as much of it as ``job_state`` reads: GET
    /apis/batch/v1/namespaces/<ns>/jobs?labelSelector=eksbench.io/run-id=<run>&limit=JOBS_PAGE, then again with
    each answer's ``metadata.continue`` until it has none (Kubernetes API reference, Job v1 batch, "list": a
    JobList whose ``items`` are Jobs; "Retrieving large results sets in chunks")."""
    selector = urllib.parse.quote(f"{RUN_ID_LABEL}={spec['run_id']}")
    jobs, token = [], ""
    for _ in range(MAX_PAGES):
        more = f"&continue={urllib.parse.quote(token)}" if token else ""
        body = get("/apis/batch/v1/namespaces/%s/jobs?labelSelector=%s&limit=%d%s"
                   % (spec["namespace"], selector, JOBS_PAGE, more))
        jobs += [_kept(j) for j in body.get("items") or []]
        token = (body.get("metadata") or {}).get("continue") or ""
        if not token:
            break
    return jobs


def _kept(job: dict) -> dict:
    """A Job as ``job_state`` reads it: its name, labels and creation, whether it is suspended, its status."""
    meta = job.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "labels", "creationTimestamp") if k in meta},
            "spec": {"suspend": (job.get("spec") or {}).get("suspend")}, "status": job.get("status") or {}}


def scale_to_zero(eks: Any, cluster: str, group: str) -> dict:
    """min 0 and desired 0; max stays what it was (EKS NodegroupScalingConfig: maxSize >= 1,
    botocore's eks service-2.json). Returns the group's sizes before and after."""
    before = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)["nodegroup"]["scalingConfig"]
    after = {"minSize": 0, "maxSize": max(int(before.get("maxSize") or 1), 1), "desiredSize": 0}
    if before.get("desiredSize") or before.get("minSize"):
        eks.update_nodegroup_config(clusterName=cluster, nodegroupName=group, scalingConfig=after)
        return {"name": group, "before": before, "after": after, "changed": True}
    return {"name": group, "before": before, "after": before, "changed": False}


def restore(spec: dict, eks: Any, jobs: list, checked: set[float] | None = None) -> list[str]:
    """The GPU groups this run's unfinished Jobs need, back at their configured sizes where something set
    them to zero before those Jobs existed (a previous run's controller, between ``pulumi up``'s refresh and
    its new generation): without it the Jobs would wait for nodes until their deadline. Only groups at
    desired 0 with a configured size above it, last modified (EKS ``modifiedAt``) before the newest waiting
    Job was created: a group set to zero while the Jobs ran (``bench run --keep`` after an interrupt or a
    deadline, a person) stays at zero. The names of those restored.

    ``checked``: the newest waiting Job's creation times already looked at. One look per set of Jobs is
    enough: a group zeroed after it has a later ``modifiedAt`` than those Jobs, which is never restored."""
    waiting = [j.created_at for j in jobs if j.state == "Running" and not j.gate]
    if not waiting or (checked is not None and max(waiting) in checked):
        return []
    restored = []
    for group, size in zip(spec["node_groups"], spec.get("sizes") or []):
        found = eks.describe_nodegroup(clusterName=spec["cluster"], nodegroupName=group)["nodegroup"]
        now, modified = found["scalingConfig"], found.get("modifiedAt")
        modified_at = modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)
        if not now.get("desiredSize") and size.get("desiredSize") and modified_at < max(waiting):
            eks.update_nodegroup_config(clusterName=spec["cluster"], nodegroupName=group,
                                        scalingConfig={k: int(size[k]) for k in ("minSize", "maxSize", "desiredSize")})
            restored.append(group)
    if checked is not None:
        checked.add(max(waiting))
    return restored


def suspend_unfinished(spec: dict, jobs: list, patch: Callable[[str, dict], Any] = request) -> list[str]:
    """Suspend the run's Jobs that are neither finished nor suspended, by a JSON merge patch of
    ``spec.suspend: true`` on each (Kubernetes API reference, Job v1 batch, "patch"; the Job controller
    then deletes their pods). Finished Jobs are left as they are. Gates first, so none resumes a Job after;
    one that still does is suspended at the next look. The names of those suspended."""
    names = [j.name for j in sorted(jobs, key=lambda j: (not j.gate, j.name)) if j.state == "Running"]
    for name in names:
        patch("/apis/batch/v1/namespaces/%s/jobs/%s" % (spec["namespace"], name), {"spec": {"suspend": True}})
    return names


def act(spec: dict, decision: Decision, *, eks: Any, s3: Any, now: float,
        suspended: Sequence[str] = ()) -> dict | None:
    """Scale every GPU group autostop sizes and record it, with the Jobs suspended, in S3; None when every
    group was already at zero and no Job was suspended."""
    groups = [scale_to_zero(eks, spec["cluster"], g) for g in spec["node_groups"]]
    if not any(g["changed"] for g in groups) and not suspended:
        return None
    record = {"decided_at": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(),
              "action": decision.action, "reason": decision.reason, "jobs": dict(decision.jobs),
              "cluster": spec["cluster"], "run_id": spec["run_id"], "node_groups": groups,
              "suspended_jobs": list(suspended)}
    s3.put_object(Bucket=spec["bucket"], Key=spec["key"], Body=strict_json.dumps(record, indent=2).encode(),
                  ContentType="application/json")
    return record


def superseded(spec: dict, get: Callable[[str], Any] = request) -> str | None:
    """The generation a later `pulumi up` recorded in the owner ConfigMap when it is not ours, else None.

    Each `pulumi up` writes its generation there before it gives the GPU groups their sizes back
    (workloads.autostop_component.autostop_owner); a controller of an earlier generation, still running until its
    Deployment is replaced, must then leave the groups to the run that needs them. No ConfigMap (a stack
    made before it existed) or no generation in the spec: ours."""
    if not spec.get("generation") or not spec.get("owner"):
        return None
    try:
        body = get("/api/v1/namespaces/%s/configmaps/%s" % (spec["namespace"], spec["owner"]))
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    current = (body.get("data") or {}).get("generation")
    return current if current and current != spec["generation"] else None


def step(spec: dict, *, get: Callable[[str], Any], eks: Any, s3: Any, now: float, started_at: float,
         checked: set[float] | None = None) -> dict | None:
    """One look: the decision, and the record when it scaled something. ``checked``: ``restore``'s."""
    newer = superseded(spec, get)
    if newer:
        print(f"autostop: generation {spec['generation']} of run {spec['run_id']} is superseded by {newer} "
              "(a later pulumi up): not scaling", flush=True)
        return None
    jobs = [job_state(j) for j in list_jobs(spec, get)]
    decision = decide(jobs, now=now, started_at=started_at, deadline_minutes=spec["deadline_minutes"],
                      idle_minutes=spec["idle_minutes"])
    print("autostop:", decision.action, "-", decision.reason, flush=True)
    if decision.action != SCALE:
        for group in restore(spec, eks, jobs, checked):
            print(f"autostop: {group} was at zero while this run's Jobs wait for it: restored its configured size",
                  flush=True)
    if decision.action != SCALE:
        return None
    # Autoscaled groups scale down once no pod needs them: the run's unfinished Jobs must let go of them.
    suspended = suspend_unfinished(spec, jobs, get) if spec.get("suspend_at_deadline") else []
    return act(spec, decision, eks=eks, s3=s3, now=now, suspended=suspended)


def run(spec: dict, *, get: Callable[[str], Any], eks: Any, s3: Any, clock: Callable[[], float],
        sleep: Callable[[float], Any], rounds: int | None = None,
        heartbeat: Callable[[], Any] = lambda: None) -> list[dict]:
    """Look every POLL_SECONDS, then ``heartbeat()`` (the liveness probe reads it); ``rounds``
    bounds the loop (tests), None runs for ever."""
    started_at, records, n, checked = clock(), [], 0, set()
    while rounds is None or n < rounds:
        n += 1
        try:
            record = step(spec, get=get, eks=eks, s3=s3, now=clock(), started_at=started_at, checked=checked)
        except (OSError, ValueError, urllib.error.URLError) as e:  # API server or network: try again
            print("autostop: API error, retrying:", e, flush=True)
            record = None
        except Exception as e:  # botocore's ClientError (e.g. ResourceInUseException during an update)
            print("autostop: AWS error, retrying:", type(e).__name__, e, flush=True)
            record = None
        if record:
            records.append(record)
            print("autostop: scaled", ", ".join(g["name"] for g in record["node_groups"] if g["changed"]) or "nothing",
                  "to zero; suspended", ", ".join(record["suspended_jobs"]) or "no Job",
                  "; wrote", f"s3://{spec['bucket']}/{spec['key']}", flush=True)
        heartbeat()
        sleep(POLL_SECONDS)
    return records


def main() -> None:
    import boto3

    spec = json.loads(os.environ[ENV_AUTOSTOP])
    session = boto3.session.Session(region_name=spec["region"])
    run(spec, get=request, eks=session.client("eks"), s3=session.client("s3"), clock=time.time, sleep=time.sleep,
        heartbeat=lambda: open(spec["heartbeat"], "w").close())


if __name__ == "__main__":
    main()
