"""Why a training pod is not running, from the Kubernetes API: one pure function and a thin client.

``pod_reasons(pod)`` maps a pod's JSON (as ``GET /api/v1/namespaces/NS/pods`` returns it) to
short reasons (Unschedulable, ImagePullBackOff, OOMKilled, CrashLoopBackOff, ...). It is the
part worth testing, and it is pure.

``KubeClient`` is deliberately small: urllib against the cluster endpoint and CA from the
stack's ``kubeconfig`` output, authenticated with an EKS token made the way
``aws eks get-token`` makes it (an STS GetCallerIdentity URL presigned with boto3, with the
``x-k8s-aws-id: <cluster>`` header signed in, base64url-encoded behind ``k8s-aws-v1.``). A few
GETs (pods by label, Events, nodes, Jobs, a pod's log tail, a log stream) and one merge PATCH (a Job the run
gave up on, ``bench.cloud.pod_watch``) are all the run needs, so the ``kubernetes`` PyPI client (and its
kubeconfig ``exec`` plugin, which wants the AWS CLI on PATH) would add a dependency for nothing. The API is an
extra: when it does not answer (private endpoint, a ``public_access_cidrs`` that excludes us) the run says so once
and goes on with S3, which is the authority on results.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

from core.contract.names import (EXPERIMENT_LABEL, LUSTRE_CLIENT_LABEL, LUSTRE_CLIENT_READY, REPEAT_LABEL,
                                 RUN_ID_LABEL)

# Volumes that do not mount: the kubelet's event reasons (kubernetes pkg/kubelet/events/event.go:
# FailedMountVolume = "FailedMount", FailedAttachVolume = "FailedAttachVolume"); e.g. FSx on a node
# without the Lustre client: "mount.lustre ... No such device. Are the lustre modules loaded?"
# (aws-fsx-csi-driver#289, #356). The kubelet mounts a pod's volumes before it pulls any image
# (pkg/kubelet/kubelet.go SyncPod: volumeManager.WaitForAttachAndMount, then containerRuntime.SyncPod), so
# a scheduled pod with no "Pulling"/"Pulled" event (PullingImage, PulledImage) and no container started
# is still mounting: VOLUMES_NOT_MOUNTED, fatal once it persists as long as any other fatal reason.
MOUNT_FAILURES = ("FailedMount", "FailedAttachVolume")
PAST_MOUNT_EVENTS = frozenset({"Pulling", "Pulled", "Created", "Started", "BackOff", "Failed"})
VOLUMES_NOT_MOUNTED = "VolumesNotMounted"
# An FSx pod selects the label only a node whose Lustre client installed carries (infra.cluster.node_group). The
# user data runs before nodeadm starts the kubelet, which registers the node with its labels, so a Ready node that
# matches the pod's other selectors but lacks that label failed its install and never will take the pod: waiting
# for it is waiting for the timeout.
LUSTRE_CLIENT_MISSING = "LustreClientMissing"
# Waiting reasons that do not fix themselves; the run fails the experiment when one persists.
FATAL_WAITING = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", *MOUNT_FAILURES, VOLUMES_NOT_MOUNTED, LUSTRE_CLIENT_MISSING)
TOKEN_PREFIX = "k8s-aws-v1."


def pod_reasons(pod: dict[str, Any]) -> list[str]:
    """Short reasons why ``pod`` is not (or no longer) running well; [] for a healthy or finished-ok pod."""
    status = pod.get("status") or {}
    phase = status.get("phase", "")
    reasons: list[str] = []
    if status.get("reason") == "Evicted":
        reasons.append(f"Evicted: {status.get('message', '').strip()}".rstrip(": "))
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            reasons.append(f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message', '').strip()}".rstrip(": "))
    containers = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    for c in containers:
        name = c.get("name", "?")
        state, last = c.get("state") or {}, c.get("lastState") or {}
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            why = waiting["reason"]
            message = (waiting.get("message") or "").strip().splitlines()
            text = f"{name}: {why}" + (f": {message[0]}" if message else "")
            if why == "CrashLoopBackOff":
                prev = (last.get("terminated") or {})
                if prev.get("reason"):
                    text += f" (last exit: {prev['reason']}, code {prev.get('exitCode')})"
            reasons.append(text)
        terminated = state.get("terminated")
        if terminated and (terminated.get("exitCode") or 0) != 0:
            reasons.append(f"{name}: {terminated.get('reason') or 'Error'} (exit code {terminated.get('exitCode')})")
        elif not terminated and (last.get("terminated") or {}).get("reason") == "OOMKilled" and not waiting:
            reasons.append(f"{name}: OOMKilled before its last restart (restarts: {c.get('restartCount', 0)})")
    if phase == "Failed" and not reasons:
        reasons.append(f"pod failed: {status.get('reason') or 'Failed'} {status.get('message', '')}".strip())
    return reasons


def pod_events(pod: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The core/v1 Events about ``pod`` (``involvedObject`` kind Pod, its name and, where both say, its uid)."""
    meta = pod.get("metadata") or {}
    found = []
    for e in events:
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Pod" and obj.get("name") == meta.get("name") and \
                (not obj.get("uid") or not meta.get("uid") or obj["uid"] == meta["uid"]):
            found.append(e)
    return found


def mount_reasons(pod: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """Why ``pod``'s volumes are not mounted: its last FailedMount/FailedAttachVolume Event, or, for a
    scheduled pod that has neither started a container nor pulled an image, VOLUMES_NOT_MOUNTED; [] else."""
    status = pod.get("status") or {}
    mine = pod_events(pod, events)
    if status.get("phase") != "Pending" or any(e.get("reason") in PAST_MOUNT_EVENTS for e in mine):
        return []
    started = any((c.get("state") or {}).get(k) or (c.get("lastState") or {}).get(k)
                  for c in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
                  for k in ("running", "terminated"))
    scheduled = any(c.get("type") == "PodScheduled" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
    if started or not scheduled:
        return []
    failed = [e for e in mine if e.get("reason") in MOUNT_FAILURES]
    if failed:
        last = max(failed, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        message = (last.get("message") or "").strip().splitlines()
        return [f"volume: {last['reason']}" + (f": {message[0]}" if message else "")]
    node = (pod.get("spec") or {}).get("nodeName") or "its node"
    return [f"volume: {VOLUMES_NOT_MOUNTED}: scheduled on {node}, no image pulled and no container started yet"]


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def lustre_reasons(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    """LUSTRE_CLIENT_MISSING for an unscheduled pod that selects Lustre-ready nodes while Ready nodes matching its
    other selectors lack the label (their client install failed at boot); [] else."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    selector = dict(spec.get("nodeSelector") or {})
    if selector.pop(LUSTRE_CLIENT_LABEL, None) != LUSTRE_CLIENT_READY or status.get("phase") != "Pending" or \
            not any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in status.get("conditions") or []):
        return []
    failed = sorted((n.get("metadata") or {}).get("name", "?") for n in nodes if node_ready(n) and all(
        ((n.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items())
        and ((n.get("metadata") or {}).get("labels") or {}).get(LUSTRE_CLIENT_LABEL) != LUSTRE_CLIENT_READY)
    if not failed:
        return []
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    return [f"node: {LUSTRE_CLIENT_MISSING}: {', '.join(failed[:3])}{more} Ready without "
            f"{LUSTRE_CLIENT_LABEL}={LUSTRE_CLIENT_READY}: the Lustre client did not install at boot (the node's "
            "console output says why), so FSx pods never run there"]


def clock_offset(date_header: str | None, sent: float, received: float) -> float | None:
    """The API server's clock minus ours, in seconds, from its ``Date`` header (RFC 9110: whole seconds)
    against the middle of the request; None without a readable header."""
    from email.utils import parsedate_to_datetime

    try:
        server = parsedate_to_datetime(date_header).timestamp() if date_header else None
    except (TypeError, ValueError):
        return None
    return None if server is None else server + 0.5 - (sent + received) / 2  # + 0.5: the header truncates


def is_fatal(reason: str) -> bool:
    return any(f": {w}" in reason for w in FATAL_WAITING)


def pod_failed(pod: dict[str, Any]) -> bool:
    """A pod whose log is worth showing: failed, or a container that exited non-zero / crash-loops."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return True
    for c in status.get("containerStatuses") or []:
        state, last = c.get("state") or {}, c.get("lastState") or {}
        if (state.get("terminated") or {}).get("exitCode") not in (None, 0):
            return True
        if (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff" or last.get("terminated"):
            return True
    return False


def summarize(pods: list[dict[str, Any]], events: list[dict[str, Any]] = (),
              nodes: list[dict[str, Any]] = ()) -> tuple[str, list[str]]:
    """(state word, reasons) for one experiment's pods: 'pending', 'running', 'failing', or '' (no pods).
    ``events``: the namespace's Pod Events (``KubeClient.pod_events``), for volumes that do not mount; ``nodes``:
    the cluster's nodes, for nodes whose Lustre client failed (FSx stacks)."""
    if not pods:
        return "", []
    reasons = [f"{p.get('metadata', {}).get('name', '?')}: {r}" for p in pods
               for r in lustre_reasons(p, list(nodes)) + pod_reasons(p) + mount_reasons(p, list(events))]  # the cause first
    phases = {(p.get("status") or {}).get("phase") for p in pods}
    if reasons and any(pod_failed(p) for p in pods):
        return "failing", reasons
    if "Pending" in phases:
        return "pending", reasons
    if "Running" in phases:
        return "running", reasons
    return ("succeeded" if phases == {"Succeeded"} else "pending"), reasons


# --- the thin client -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterAccess:
    server: str
    ca_pem: bytes | None
    cluster_name: str
    region: str


def access_from_kubeconfig(kubeconfig: Any, cluster_name: str, region: str) -> ClusterAccess:
    """Endpoint and CA from the stack's ``kubeconfig`` output (a dict, or its JSON/YAML text)."""
    if isinstance(kubeconfig, str):
        try:
            kubeconfig = json.loads(kubeconfig)
        except ValueError:
            import yaml

            kubeconfig = yaml.safe_load(kubeconfig)
    cluster = ((kubeconfig or {}).get("clusters") or [{}])[0].get("cluster") or {}
    server = cluster.get("server")
    if not server:
        raise ValueError("the kubeconfig output has no cluster server")
    ca = cluster.get("certificate-authority-data")
    return ClusterAccess(server=server.rstrip("/"), ca_pem=base64.b64decode(ca) if ca else None,
                         cluster_name=cluster_name, region=region)


def eks_token(cluster_name: str, region: str, session: Any = None) -> str:
    """A bearer token for EKS, as ``aws eks get-token --cluster-name NAME`` makes it (valid 15 min)."""
    import boto3

    sts = (session or boto3).client("sts", region_name=region)

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers["x-k8s-aws-id"] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class KubeClient:
    def __init__(self, access: ClusterAccess, timeout: float = 10.0, token_ttl: float = 600.0):
        self.access, self.timeout, self.token_ttl = access, timeout, token_ttl
        self._token: tuple[str, float] | None = None
        self.clock_offset: float | None = None  # the API server's clock minus ours (clock_offset)
        self._ctx = ssl.create_default_context()
        if access.ca_pem:
            with tempfile.NamedTemporaryFile("wb", suffix=".pem") as f:  # load_verify_locations wants a path
                f.write(access.ca_pem)
                f.flush()
                self._ctx = ssl.create_default_context(cafile=f.name)

    def _bearer(self) -> str:
        if self._token is None or time.monotonic() - self._token[1] > self.token_ttl:
            self._token = (eks_token(self.access.cluster_name, self.access.region), time.monotonic())
        return self._token[0]

    def _open(self, path: str, query: dict[str, str], timeout: float | None = None, patch: dict | None = None):
        """GET ``path``, or with ``patch`` a JSON merge patch of it (``Content-Type: application/merge-patch+json``)."""
        url = f"{self.access.server}{path}?{urllib.parse.urlencode(query)}"
        headers = {"Authorization": f"Bearer {self._bearer()}", "Accept": "application/json",
                   **({"Content-Type": "application/merge-patch+json"} if patch is not None else {})}
        req = urllib.request.Request(url, headers=headers, method="PATCH" if patch is not None else "GET",
                                     data=json.dumps(patch).encode() if patch is not None else None)
        sent = time.time()
        response = urllib.request.urlopen(req, timeout=timeout or self.timeout, context=self._ctx)
        offset = clock_offset(response.headers.get("Date"), sent, time.time())
        if offset is not None:
            self.clock_offset = offset
        return response

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        with self._open(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector}) as r:
            return json.load(r).get("items") or []

    def events(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's core/v1 Events about Pods (field selector ``involvedObject.kind``, one the API
        server supports for events: pkg/apis/core/v1 AddFieldLabelConversionsForEvent)."""
        with self._open(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": "involvedObject.kind=Pod"}) as r:
            return json.load(r).get("items") or []

    def jobs(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        """The namespace's batch/v1 Jobs (those ``selector`` matches, where given)."""
        with self._open(f"/apis/batch/v1/namespaces/{namespace}/jobs", {"labelSelector": selector} if selector
                        else {}) as r:
            return json.load(r).get("items") or []

    def patch_job(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of one Job (Kubernetes API reference, Job v1 batch, "patch")."""
        with self._open(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", {}, patch=patch) as r:
            return json.load(r)

    def nodes(self) -> list[dict[str, Any]]:
        with self._open("/api/v1/nodes", {}) as r:
            return json.load(r).get("items") or []

    def log_tail(self, namespace: str, pod: str, lines: int = 20, previous: bool = False,
                 timestamps: bool = False) -> list[str]:
        """The last ``lines`` lines of the pod's log (``timestamps``: each after the RFC 3339 time the
        kubelet received it and a space: core/v1 PodLogOptions ``timestamps``)."""
        query = {"tailLines": str(lines)}
        if previous:
            query["previous"] = "true"
        if timestamps:
            query["timestamps"] = "true"
        with self._open(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", query) as r:
            return list(log_lines(r, timestamps))

    def follow(self, namespace: str, pod: str, tail: int = 50, timestamps: bool = False) -> Iterator[str]:
        query = {"follow": "true", "tailLines": str(tail), **({"timestamps": "true"} if timestamps else {})}
        with self._open(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", query, timeout=3600) as r:
            yield from log_lines(r, timestamps)


def log_lines(response: Any, timestamps: bool) -> Iterator[str]:
    """A pod log's lines as they arrive (``read1``: what the server sent so far), each as a node log's line
    shows (``bench.results.node_logs``: its last carriage-return segment, cut at 16 KiB with a note), in
    bounded memory however long a line the pod wrote; ``timestamps``: the kubelet's time stays in front."""
    from bench.results.node_logs import offset_lines
    from bench.results.safe_paths import LINE_CHUNK

    chunks = iter(lambda: response.read1(LINE_CHUNK), b"")
    return (line for _, _, line in offset_lines(chunks, stamp=timestamps))


# When things happened, for the run's timeline. Fields: Kubernetes API core/v1 ContainerStateRunning and
# ContainerStateTerminated ``startedAt``, NodeCondition ``type: Ready`` with ``lastTransitionTime``.


def containers_started_at(pods: list[dict[str, Any]]) -> float | None:
    """The earliest start of any container of the pods (the image was pulled by then), epoch seconds."""
    from bench.results.timeline import parse_iso

    times = [parse_iso(((c.get("state") or {}).get(kind) or {}).get("startedAt"))
             for pod in pods for c in ((pod.get("status") or {}).get("containerStatuses") or [])
             for kind in ("running", "terminated")]
    times = [t for t in times if t is not None]
    return min(times) if times else None


def gpu_nodes_ready_at(nodes: list[dict[str, Any]], expected: int) -> float | None:
    """When the last of ``expected`` GPU nodes (those with the GPU groups' taint) turned Ready; None before."""
    from bench.results.timeline import parse_iso
    from infra.environment import GPU_TAINT

    ready = []
    for node in nodes:
        if not any(t.get("key") == GPU_TAINT["key"] for t in (node.get("spec") or {}).get("taints") or []):
            continue
        for c in (node.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") == "True":
                t = parse_iso(c.get("lastTransitionTime"))
                if t is not None:
                    ready.append(t)
    if expected <= 0 or len(ready) < expected:
        return None
    return sorted(ready)[expected - 1]


def experiment_selector(experiment: str, run_id: str, repeat: int = 0) -> str:
    """The labels ``workloads.job_manifests.experiment_labels`` puts on an experiment's pods (one repeat's
    with ``repeat`` k >= 1)."""
    return f"{EXPERIMENT_LABEL}={experiment},{RUN_ID_LABEL}={run_id}" + (f",{REPEAT_LABEL}={repeat}" if repeat else "")
