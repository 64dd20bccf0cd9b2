"""Why a pod is not running (pure) and the EKS token the thin client sends."""

from __future__ import annotations

import base64
import urllib.parse

from bench.cloud import kube


def pod(name="job-0", phase="Running", containers=(), conditions=(), **status):
    return {"metadata": {"name": name},
            "status": {"phase": phase, "containerStatuses": list(containers), "conditions": list(conditions), **status}}


def container(state=None, last=None, restarts=0, name="main"):
    return {"name": name, "state": state or {"running": {}}, "lastState": last or {}, "restartCount": restarts}


def test_a_healthy_pod_has_no_reason():
    assert kube.pod_reasons(pod(containers=[container()])) == []
    assert kube.summarize([pod(containers=[container()])]) == ("running", [])


def test_unschedulable_pending_pod():
    p = pod(phase="Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}])
    assert kube.pod_reasons(p) == ["Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."]
    state, reasons = kube.summarize([p])
    assert state == "pending" and reasons[0].startswith("job-0: Unschedulable")


def test_image_pull_backoff_is_fatal():
    p = pod(phase="Pending", containers=[container(state={"waiting": {
        "reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'}})])
    reasons = kube.pod_reasons(p)
    assert reasons == ['main: ImagePullBackOff: Back-off pulling image "nope:1"']
    assert kube.is_fatal(reasons[0]) and not kube.is_fatal("Unschedulable: 0/3 nodes")


def test_crash_loop_names_the_last_exit():
    p = pod(containers=[container(state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                                  last={"terminated": {"reason": "OOMKilled", "exitCode": 137}}, restarts=3)])
    assert kube.pod_reasons(p) == ["main: CrashLoopBackOff: back-off 40s (last exit: OOMKilled, code 137)"]
    assert kube.pod_failed(p)
    assert kube.summarize([p])[0] == "failing"


def test_oom_killed_terminated_container():
    p = pod(phase="Failed", containers=[container(state={"terminated": {"reason": "OOMKilled", "exitCode": 137}})])
    assert kube.pod_reasons(p) == ["main: OOMKilled (exit code 137)"]
    assert kube.pod_failed(p)


def test_oom_before_a_restart_of_a_running_container_is_reported():
    p = pod(containers=[container(last={"terminated": {"reason": "OOMKilled", "exitCode": 137}}, restarts=1)])
    assert kube.pod_reasons(p) == ["main: OOMKilled before its last restart (restarts: 1)"]


def test_container_creating_is_not_a_reason_and_evicted_is():
    creating = pod(phase="Pending", containers=[container(state={"waiting": {"reason": "ContainerCreating"}})])
    assert kube.pod_reasons(creating) == []
    evicted = pod(phase="Failed", reason="Evicted", message="The node was low on resource: memory.")
    assert kube.pod_reasons(evicted) == ["Evicted: The node was low on resource: memory."]


def test_succeeded_pods_and_no_pods():
    done = pod(phase="Succeeded", containers=[container(state={"terminated": {"reason": "Completed", "exitCode": 0}})])
    assert kube.summarize([done]) == ("succeeded", [])
    assert kube.summarize([]) == ("", [])


def test_access_from_the_kubeconfig_output():
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    access = kube.access_from_kubeconfig({"clusters": [{"cluster": {"server": "https://x.eks.amazonaws.com/",
                                                                    "certificate-authority-data": ca}}]},
                                         "eksbench-dev", "us-west-2")
    assert access.server == "https://x.eks.amazonaws.com" and access.ca_pem.startswith(b"-----BEGIN")
    as_text = kube.access_from_kubeconfig('{"clusters": [{"cluster": {"server": "https://y"}}]}', "c", "r")
    assert as_text.server == "https://y" and as_text.ca_pem is None


def test_eks_token_is_a_presigned_get_caller_identity_with_the_cluster_header(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    token = kube.eks_token("eksbench-dev", "us-west-2")
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    raw = token[len("k8s-aws-v1."):]
    url = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
    parsed = urllib.parse.urlparse(url)
    query = urllib.parse.parse_qs(parsed.query)
    assert parsed.netloc == "sts.us-west-2.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Expires"] == ["60"]


def test_the_selector_matches_the_job_labels():
    from core.config.model import Experiment
    from workloads.job_manifests import experiment_labels

    labels = experiment_labels(Experiment(name="e1"), run_id="r9", instance="x", component="training")
    for pair in kube.experiment_selector("e1", "r9").split(","):
        key, value = pair.split("=")
        assert labels[key] == value


def scheduled(name="job-0", node="ip-10-0-1-2", uid="u1", containers=None):
    p = pod(name=name, phase="Pending", conditions=[{"type": "PodScheduled", "status": "True"}],
            containers=containers or [container(state={"waiting": {"reason": "ContainerCreating"}})])
    p["metadata"]["uid"], p["spec"] = uid, {"nodeName": node}
    return p


def event(reason, message="", name="job-0", uid="u1", kind="Pod", at="2026-11-28T05:00:00Z"):
    """A core/v1 Event as GET /api/v1/namespaces/NS/events lists it."""
    return {"involvedObject": {"kind": kind, "name": name, "uid": uid}, "reason": reason, "message": message,
            "type": "Warning" if reason.startswith("Failed") else "Normal", "lastTimestamp": at}


# What the kubelet reports for FSx on a node without the Lustre client (aws-fsx-csi-driver#289).
LUSTRE_MISSING = ('MountVolume.SetUp failed for volume "pvc-3152" : rpc error: code = Internal desc = Could not mount '
                  '"fs-08a9.fsx.us-west-2.amazonaws.com@tcp:/aqhs7bev" at "/var/lib/kubelet/pods/1953/volumes": '
                  "mount failed: exit status 19\nOutput: mount.lustre: ... failed: No such device\n"
                  "Are the lustre modules loaded?")


def test_a_failed_mount_event_is_a_fatal_named_reason():
    events = [event("Scheduled"), event("FailedMount", "timed out", at="2026-11-28T05:01:00Z"),
              event("FailedMount", LUSTRE_MISSING, at="2026-11-28T05:02:00Z"),
              event("FailedMount", "another pod's", name="job-1", uid="u2")]
    state, reasons = kube.summarize([scheduled()], events)
    assert state == "pending"
    assert reasons == ['job-0: volume: FailedMount: MountVolume.SetUp failed for volume "pvc-3152" : rpc error: '
                       'code = Internal desc = Could not mount "fs-08a9.fsx.us-west-2.amazonaws.com@tcp:/aqhs7bev" '
                       'at "/var/lib/kubelet/pods/1953/volumes": mount failed: exit status 19']
    assert kube.is_fatal(reasons[0])
    assert kube.summarize([scheduled()], [])[1] != reasons  # without Events, ContainerCreating says nothing of it


def test_a_mount_not_finished_is_a_fatal_reason_until_the_kubelet_moves_past_it():
    reasons = kube.summarize([scheduled()], [event("Scheduled")])[1]
    assert reasons == ["job-0: volume: VolumesNotMounted: scheduled on ip-10-0-1-2, no image pulled and no "
                       "container started yet"] and kube.is_fatal(reasons[0])
    # volumes mount before the image is pulled: a Pulling event, or a started container, ends it
    assert kube.summarize([scheduled()], [event("Pulling", 'Pulling image "a/b:1"')])[1] == []
    started = scheduled(containers=[container(state={"running": {"startedAt": "2026-11-28T05:00:00Z"}})])
    assert kube.summarize([started], [event("FailedMount", "old")])[1] == []
    # a pod not yet scheduled is the scheduler's business (Unschedulable), not a mount
    assert kube.mount_reasons(pod(phase="Pending"), [event("FailedMount", "x")]) == []
    # an Event of an earlier pod of the same name (another uid) is not this pod's
    assert kube.mount_reasons(scheduled(uid="u3"), [event("FailedMount", "x"), event("Pulled", uid="u3")]) == []


GROUP = {"eksbench.io/pool": "p5"}  # infra.environment.GPU_NODE_LABEL_KEY
FSX_SELECTOR = {**GROUP, "eksbench.io/lustre-client": "ready"}
UNSCHEDULED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
               "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}


def waiting_for_lustre(selector=None):
    p = pod(phase="Pending", conditions=[UNSCHEDULED])
    p["spec"] = {"nodeSelector": dict(FSX_SELECTOR if selector is None else selector)}
    return p


def node(name, labels, ready=True):
    """A core/v1 Node as GET /api/v1/nodes lists it."""
    return {"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_ready_node_without_the_lustre_label_is_a_fatal_named_reason():
    """The node whose client install failed joins anyway (nodeadm-run does not require the user data to succeed);
    the FSx pod it would have taken waits for a label that never comes."""
    failed = [node("ip-10-0-1-7", GROUP), node("ip-10-0-1-8", GROUP)]
    state, reasons = kube.summarize([waiting_for_lustre()], [], failed)
    assert state == "pending"
    assert reasons == ["job-0: node: LustreClientMissing: ip-10-0-1-7, ip-10-0-1-8 Ready without "
                       "eksbench.io/lustre-client=ready: the Lustre client did not install at boot (the node's console "
                       "output says why), so FSx pods never run there",
                       "job-0: Unschedulable: 0/3 nodes are available: 3 node(s) didn't match Pod's node "
                       "affinity/selector."]
    assert kube.is_fatal(reasons[0])
    assert kube.summarize([waiting_for_lustre()], [])[1] != reasons  # without the nodes, only the scheduler's words


def test_lustre_waits_that_may_still_end_are_not_fatal():
    labelled = node("ip-10-0-1-7", {**GROUP, "eksbench.io/lustre-client": "ready"})
    booting = node("ip-10-0-1-8", GROUP, ready=False)  # not Ready: its user data may still be running
    other_group = node("ip-10-0-2-9", {"eksbench.io/pool": "p4d"})
    for nodes in ([], [labelled], [booting], [other_group]):
        assert kube.lustre_reasons(waiting_for_lustre(), nodes) == [], nodes
    # an EFS pod selects no Lustre label; a scheduled pod is the kubelet's business (mount_reasons)
    assert kube.lustre_reasons(waiting_for_lustre(GROUP), [node("ip-10-0-1-7", GROUP)]) == []
    assert kube.lustre_reasons(scheduled(), [node("ip-10-0-1-7", GROUP)]) == []


def test_the_run_reads_the_events_and_marks_the_experiment_fatal(tmp_path):
    """bench run's watch (bench.cloud.pod_watch): a FailedMount Event starts the fatal clock, as ImagePullBackOff
    does; the experiment then ends failed after fatal_after_s and the run tears down."""
    from types import SimpleNamespace

    from bench.cloud.backend import CloudBackend
    from bench.cloud.watched import Watched

    class Cluster:
        def pods(self, namespace, selector):
            return [scheduled()]

        def events(self, namespace):
            return [event("FailedMount", LUSTRE_MISSING)]

        def nodes(self):
            return []

    backend = CloudBackend(stack="s", cfg=SimpleNamespace(namespace="ns", run_id="r", region="us-west-2"),
                           root=tmp_path, results_root=tmp_path)
    backend.pods.client, watched = Cluster(), Watched(name="e", uri="s3://b/p/", timeout_s=60, deadline=1e12,
                                                      experiment="e")
    backend.pods.look(watched, at=0.0)
    assert watched.fatal_since is not None and "FailedMount" in watched.reasons[0]


def test_the_run_reads_the_nodes_of_an_fsx_stack_and_marks_a_failed_lustre_install_fatal(tmp_path):
    from types import SimpleNamespace

    from bench.cloud.backend import CloudBackend
    from bench.cloud.watched import Watched

    class Cluster:
        def pods(self, namespace, selector):
            return [waiting_for_lustre()]

        def events(self, namespace):
            return []

        def nodes(self):
            return [node("ip-10-0-1-7", GROUP)]

    def look(kind):
        cfg = SimpleNamespace(namespace="ns", run_id="r", region="us-west-2", storage=SimpleNamespace(kind=kind))
        backend = CloudBackend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path)
        backend.pods.client, watched = Cluster(), Watched(name="e", uri="s3://b/p/", timeout_s=60, deadline=1e12,
                                                          experiment="e")
        backend.pods.look(watched, at=0.0)
        return watched

    fsx = look("fsx")
    assert fsx.fatal_since is not None and "LustreClientMissing" in fsx.reasons[0]
    assert look("efs").fatal_since is None  # an EFS stack's pods select no Lustre label


def test_one_look_reads_the_events_and_nodes_once_for_every_experiment(tmp_path):
    """A sweep's look at the cluster: each experiment's pods, but the namespace's Events and the nodes once, and
    again at the next look."""
    from collections import Counter
    from types import SimpleNamespace

    from bench.cloud.backend import CloudBackend
    from bench.cloud.watched import Watched

    calls = Counter()

    class Cluster:
        def pods(self, namespace, selector):
            calls["pods"] += 1
            return [waiting_for_lustre()]

        def events(self, namespace):
            calls["events"] += 1
            return []

        def nodes(self):
            calls["nodes"] += 1
            return [node("ip-10-0-1-7", GROUP)]

    cfg = SimpleNamespace(namespace="ns", run_id="r", region="us-west-2", storage=SimpleNamespace(kind="fsx"))
    backend = CloudBackend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path)
    backend.pods.client = Cluster()
    watched = [Watched(name=f"e{i}", uri=f"s3://b/p/e{i}/", timeout_s=60, deadline=1e12, experiment=f"e{i}")
               for i in range(12)]
    for look in (1, 2):
        for w in watched:
            backend.pods.look(w, at=100.0 * look)
        assert calls == {"pods": 12 * look, "events": look, "nodes": look}, calls
    assert all("LustreClientMissing" in w.reasons[0] for w in watched)  # every experiment judged from the one list


def test_a_look_survives_an_api_that_fails_or_answers_in_shapes_it_does_not_know(tmp_path):
    """The watch's rule: the Kubernetes API is a warning, never a failure (bench.cloud.pod_watch)."""
    from types import SimpleNamespace

    from bench.cloud.backend import CloudBackend
    from bench.cloud.watched import Watched

    class Cluster:
        def pods(self, namespace, selector):
            return [scheduled()]

        def events(self, namespace):
            raise ConnectionResetError("the API server went away")

        def nodes(self):
            return [{"spec": {"taints": ["NoSchedule"]}}, {"status": "Ready"}]

    for kind in ("efs", "fsx"):
        cfg = SimpleNamespace(namespace="ns", run_id="r", region="us-west-2", storage=SimpleNamespace(kind=kind))
        backend = CloudBackend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path)
        backend.pods.client = Cluster()
        w = Watched(name="e", uri="s3://b/p/", timeout_s=60, deadline=1e12, experiment="e")
        backend.pods.look(w, at=0.0)  # raised AttributeError on the malformed node before
        assert w.reasons == kube.summarize([scheduled()], [])[1], kind  # judged from the pod alone
