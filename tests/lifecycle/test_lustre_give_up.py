"""A run whose pods wait on nodes without the Lustre client ends, and their Jobs stop holding the autoscaler.

Cluster Autoscaler's node template promises the Lustre-ready label, so a pending FSx pod makes it launch node after
node up to the group's max_size while the Job lives. The run gives up on the experiment after ``fatal_after_s``;
these tests drive the cloud backend through the lifecycle (``pulumi up`` and S3 stood in for) and check that the
Jobs are failed in the cluster before the teardown, with ``pulumi destroy`` and with ``--keep``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.cloud import backend as backend_module
from bench.cloud import kube, run_timeline, s3_results
from bench.cloud.backend import CloudBackend
from bench.cloud.watched import Watched
from bench.lifecycle import Control, run_lifecycle
from tests.lifecycle.test_kube import GROUP, node, waiting_for_lustre


def job(name, *, finished=None, suspend=False):
    """A batch/v1 Job as GET /apis/batch/v1/namespaces/NS/jobs lists it."""
    conditions = [{"type": finished, "status": "True"}] if finished else []
    return {"metadata": {"name": name, "labels": {}}, "spec": {"suspend": suspend}, "status": {"conditions": conditions}}


class Cluster:
    """The Kubernetes API of a cluster whose only GPU node came up without the Lustre client."""

    def __init__(self, log):
        self.log = log
        self.pods = lambda namespace, selector: [waiting_for_lustre()]  # unscheduled, selecting the label
        self.events = lambda namespace: []
        self.nodes = lambda: [node("ip-10-0-1-7", GROUP)]  # Ready, without the label

    def jobs(self, namespace, selector=""):
        self.log.append(("jobs", namespace, selector))
        return [job("fsx-r1"), job("fsx-r1-eval", suspend=True), job("fsx-r1-old", finished="Failed")]

    def patch_job(self, namespace, name, patch):
        self.log.append(("patch", namespace, name, patch))
        return {}


class Stack:
    def __init__(self, log):
        self.log = log

    def destroy(self, **_):
        self.log.append(("destroy",))


class Backend(CloudBackend):
    """The cloud backend with ``pulumi up`` done (a stack and outputs) and the rows made from what it watched."""

    def provision(self, ctl):
        self.stk = Stack(self.log)
        self.outputs = {"cluster_name": "eksbench-s", "node_groups": ["system-ng", "gpu-p5-ng"]}

    def start(self, ctl):
        self.watched = [Watched(name="fsx", uri="s3://b/p/fsx/", timeout_s=3600, deadline=1e12, experiment="fsx")]
        self.pods.client = Cluster(self.log)

    def collect(self, ctl):
        return [{"experiment": w.name, "status": w.state} for w in self.watched]


@pytest.mark.parametrize("keep", [False, True])
def test_lustre_client_missing_ends_the_run_with_its_jobs_failed_before_the_teardown(tmp_path, monkeypatch, keep):
    log = []
    monkeypatch.setattr(s3_results, "read_json", lambda *a, **k: None)  # no summary ever comes
    monkeypatch.setattr(run_timeline, "audit", lambda *a, **k: True)
    monkeypatch.setattr(backend_module.pulumi_cli, "sync_stack_file", lambda *a, **k: None)
    monkeypatch.setattr(backend_module, "scale_to_zero", lambda outputs, **k: log.append(("scale_to_zero",)) or True)
    cfg = SimpleNamespace(namespace="ns", run_id="r1", region="us-west-2", storage=SimpleNamespace(kind="fsx"))
    backend = Backend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path, keep=keep, poll=0.01,
                      progress_every=60, kube_every=0.0, fatal_after_s=0.0)
    backend.log, backend.ready = log, SimpleNamespace(cfg=cfg)

    outcome = run_lifecycle(backend, Control(deadline_s=60))

    assert outcome.code == 1 and outcome.rows == [{"experiment": "fsx", "status": "failed"}]
    assert "LustreClientMissing" in backend.watched[0].reasons[0]
    patches = [entry for entry in log if entry[0] == "patch"]
    # the unfinished Job only: the suspended evaluation never starts (its gate sees the training Failed)
    assert patches == [("patch", "ns", "fsx-r1", {"spec": {"activeDeadlineSeconds": 1}})]
    assert ("jobs", "ns", kube.experiment_selector("fsx", "r1")) in log
    teardown = ("scale_to_zero",) if keep else ("destroy",)
    assert log.index(patches[0]) < log.index(teardown)


def test_a_cluster_that_does_not_answer_leaves_the_jobs_to_the_teardown(tmp_path, capsys):
    class Silent(Cluster):
        def jobs(self, namespace, selector=""):
            raise ConnectionResetError("the API server went away")

    cfg = SimpleNamespace(namespace="ns", run_id="r1", region="us-west-2")
    backend = CloudBackend(stack="s", cfg=cfg, root=tmp_path, results_root=tmp_path)
    backend.pods.client = Silent([])
    assert backend.pods.fail_jobs(Watched(name="e", uri="s3://b/p/", timeout_s=60, experiment="e")) == []
    assert "could not stop its Jobs (ConnectionResetError" in capsys.readouterr().err


def test_the_client_patches_a_job_with_a_json_merge_patch(monkeypatch):
    import io
    import json

    sent = []

    class Response(io.BytesIO):
        headers = {}

    def urlopen(req, timeout=None, context=None):
        sent.append(req)
        return Response(b'{"items": []}')

    monkeypatch.setattr(kube, "eks_token", lambda *a, **k: "k8s-aws-v1.x")
    monkeypatch.setattr(kube.urllib.request, "urlopen", urlopen)
    client = kube.KubeClient(kube.ClusterAccess(server="https://k", ca_pem=None, cluster_name="c", region="r"))
    client.patch_job("ns", "fsx-r1", {"spec": {"activeDeadlineSeconds": 1}})
    assert client.jobs("ns") == []
    patch, listing = sent
    assert (patch.get_method(), patch.full_url) == ("PATCH", "https://k/apis/batch/v1/namespaces/ns/jobs/fsx-r1?")
    assert patch.get_header("Content-type") == "application/merge-patch+json"
    assert json.loads(patch.data) == {"spec": {"activeDeadlineSeconds": 1}}
    assert (listing.get_method(), listing.full_url) == ("GET", "https://k/apis/batch/v1/namespaces/ns/jobs?")
