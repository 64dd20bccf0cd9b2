"""The autostop controller (workloads/train/control/autostop.py) against a fake Kubernetes API and moto's EKS and S3.

The fake API server is a loopback ``http.server`` that answers the requests the controller
makes: the Job list of a namespace filtered by label, in batch/v1's shape (Kubernetes API
reference, "Job v1 batch", list: ``GET /apis/batch/v1/namespaces/{namespace}/jobs`` returns a
``JobList`` with ``apiVersion``, ``kind``, ``metadata.resourceVersion`` and ``items``), and a
JSON merge patch of one Job (``PATCH .../jobs/{name}``, ``Content-Type: application/merge-patch+json``,
RFC 7386; it returns the patched Job). It checks the bearer token, and fails loudly on anything else.
EKS and S3 are moto's, in process; the controller talks to them through boto3 exactly as in the pod.
"""

from __future__ import annotations

import datetime
import functools
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from moto import mock_aws

from core.config.autostop import job_state
from core.contract.names import AUTOSTOP_OWNER_CONFIG_MAP
from workloads.train.control import autostop, gate

NAMESPACE, RUN, CLUSTER, BUCKET = "eksbench", "run-007", "eksbench-dev", "eksbench-results"
KEY = f"eksbench/dev/{RUN}/autostop.json"
TOKEN = "service-account-token"


def merge_patch(target, patch):
    """RFC 7386: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class FakeJobsApi:
    """GET /apis/batch/v1/namespaces/<ns>/jobs?labelSelector=eksbench.io/run-id=<run>, the owner ConfigMap
    (GET /api/v1/namespaces/<ns>/configmaps/<name>, a ConfigMap or a 404 Status) and a merge patch of one
    Job (PATCH /apis/batch/v1/namespaces/<ns>/jobs/<name>); nothing else."""

    def __init__(self):
        self.jobs: list[dict] = []
        self.requests: list[str] = []
        self.patches: list[tuple[str, dict]] = []  # (Job name, the patch), in order
        self.owner: dict | None = None  # the owner ConfigMap's data; None: no such ConfigMap (404)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                api.requests.append(self.path)
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
                if url.path == f"/api/v1/namespaces/{NAMESPACE}/configmaps/{AUTOSTOP_OWNER_CONFIG_MAP}":
                    if api.owner is None:
                        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                    return self._send(200, {"apiVersion": "v1", "kind": "ConfigMap", "data": api.owner,
                                            "metadata": {"name": AUTOSTOP_OWNER_CONFIG_MAP, "namespace": NAMESPACE}})
                if (url.path != f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
                        or not {"labelSelector", "limit"} <= set(query) <= {"labelSelector", "limit", "continue"}):
                    return self._send(500, {"kind": "Status", "code": 500,
                                            "message": f"the fake API does not answer {self.path}"})
                key, _, value = query["labelSelector"][0].partition("=")
                items = [j for j in api.jobs if j["metadata"]["labels"].get(key) == value]
                # Chunks as the API server gives them: at most ``limit``, and an opaque token for the rest.
                start, limit = int(query.get("continue", ["0"])[0]), int(query["limit"][0])
                rest = {"continue": str(start + limit)} if start + limit < len(items) else {}
                self._send(200, {"apiVersion": "batch/v1", "kind": "JobList", "items": items[start:start + limit],
                                 "metadata": {"resourceVersion": str(len(api.requests)), **rest}})

            def do_PATCH(self):  # noqa: N802
                api.requests.append("PATCH " + self.path)
                prefix = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/"
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._send(415, {"kind": "Status", "code": 415, "reason": "UnsupportedMediaType"})
                name = self.path[len(prefix):] if self.path.startswith(prefix) else ""
                found = [i for i, j in enumerate(api.jobs) if j["metadata"]["name"] == name]
                if not found or "/" in name or "?" in name:
                    return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                patch = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                api.patches.append((name, patch))
                api.jobs[found[0]] = merge_patch(api.jobs[found[0]], patch)
                self._send(200, api.jobs[found[0]])

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def k8s_job(name, *, created="2027-01-15T08:00:00Z", done=None, suspend=False, component="training", run=RUN):
    status = {"active": 1} if done is None else {"conditions": [
        {"type": done[0], "status": "True", "lastTransitionTime": done[1]}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "creationTimestamp": created,
                         "labels": {"eksbench.io/run-id": run, "app.kubernetes.io/component": component}},
            "spec": {"parallelism": 2, "completions": 2, "suspend": suspend}, "status": status}


@pytest.fixture
def api(tmp_path):
    fake = FakeJobsApi()
    (tmp_path / "token").write_text(TOKEN)
    yield fake, functools.partial(gate.request, api=fake.url, sa=f"{tmp_path}/")
    fake.server.shutdown()


@pytest.fixture
def aws():
    with mock_aws():
        session = boto3.session.Session(region_name="us-west-2")
        eks, s3 = session.client("eks"), session.client("s3")
        role = "arn:aws:iam::123456789012:role/eks"
        eks.create_cluster(name=CLUSTER, roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-0123456789abcdef0"]})
        for group, size in (("p3-20270115", 2), ("g5-20270115", 1)):
            eks.create_nodegroup(clusterName=CLUSTER, nodegroupName=group, nodeRole=role,
                                 subnets=["subnet-0123456789abcdef0"],
                                 scalingConfig={"minSize": 0, "maxSize": size, "desiredSize": size})
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield eks, s3


SPEC = {"namespace": NAMESPACE, "run_id": RUN, "cluster": CLUSTER, "node_groups": ["p3-20270115", "g5-20270115"],
        "region": "us-west-2", "bucket": BUCKET, "key": KEY, "deadline_minutes": 240, "idle_minutes": 5}


class Clock:
    """Epoch seconds; every sleep moves it on (2027-01-15T08:00:00Z is 1800000000)."""

    def __init__(self, minutes):
        self.now = 1_800_000_000 + minutes * 60

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def sizes(eks, group):
    return eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=group)["nodegroup"]["scalingConfig"]


def test_waits_while_a_job_runs_then_scales_every_gpu_group_to_zero_and_records_it(api, aws):
    fake, get = api
    eks, s3 = aws
    fake.jobs = [k8s_job("resnet"), k8s_job("other-run", run="run-006", done=("Complete", "2027-01-15T07:00:00Z"))]
    clock = Clock(minutes=20)
    assert autostop.run(SPEC, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=3) == []
    assert sizes(eks, "p3-20270115")["desiredSize"] == 2
    # The training Job completes at 08:22; nodes may idle 5 minutes (10 rounds of 30 s) before they go.
    fake.jobs[0] = k8s_job("resnet", done=("Complete", "2027-01-15T08:22:00Z"))
    records = autostop.run(SPEC, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=12)
    assert len(records) == 1, records
    for group, size in (("p3-20270115", 2), ("g5-20270115", 1)):
        assert sizes(eks, group) == {"minSize": 0, "maxSize": size, "desiredSize": 0}
    record = json.loads(s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read())
    assert record["jobs"] == {"resnet": "Complete"}  # the other run's Job is not this run's
    assert "every Job finished" in record["reason"] and record["action"] == "scale-to-zero"
    assert [g["before"]["desiredSize"] for g in record["node_groups"]] == [2, 1]
    assert all(r.startswith(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs?labelSelector=") for r in fake.requests)


def test_a_controller_of_an_earlier_generation_never_scales_the_groups_a_later_run_needs(api, aws):
    """A re-run: pulumi up records its generation, then gives the groups their sizes back; the previous run's
    controller, its Jobs done and idle for long, still runs until its Deployment is replaced. It must stand
    down: scaling now would leave the new run's Jobs pending until their deadline."""
    fake, get = api
    eks, s3 = aws
    spec = {**SPEC, "generation": "aaaa000011112222", "owner": AUTOSTOP_OWNER_CONFIG_MAP}
    fake.jobs = [k8s_job("resnet", done=("Complete", "2027-01-15T08:22:00Z"))]
    fake.owner = {"generation": "bbbb333344445555", "run_id": "run-008"}
    clock = Clock(minutes=60)  # 38 minutes idle: its own decision would be to scale
    assert autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=3) == []
    for group, size in (("p3-20270115", 2), ("g5-20270115", 1)):
        assert sizes(eks, group)["desiredSize"] == size
    assert not any(r.startswith("/apis/batch") for r in fake.requests)  # it did not even look at its Jobs
    # Its own generation recorded (a pulumi up that changed nothing), or no record at all: it scales as before.
    fake.owner = {"generation": spec["generation"], "run_id": RUN}
    assert len(autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=1)) == 1
    assert sizes(eks, "p3-20270115")["desiredSize"] == 0


def test_the_deadline_scales_a_run_that_never_ends_and_does_it_once(api, aws):
    fake, get = api
    eks, s3 = aws
    fake.jobs = [k8s_job("stuck")]
    clock = Clock(minutes=239)
    records = autostop.run(SPEC, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=6)
    assert len(records) == 1 and "deadline passed" in records[0]["reason"] and "stuck" in records[0]["reason"]
    assert sizes(eks, "p3-20270115")["desiredSize"] == 0
    assert fake.patches == [] and records[0]["suspended_jobs"] == []  # no autoscaled group: no Job touched


def test_past_its_deadline_with_an_autoscaled_group_it_suspends_the_unfinished_jobs_and_scales_the_others(api, aws):
    """g5 is Cluster Autoscaler's (out of node_groups): autostop never sizes it, and at the deadline suspends
    the run's unfinished Jobs, whose pods Kubernetes then deletes, so the autoscaler can remove their nodes.
    Finished Jobs and Jobs already suspended are left as they are; p3, autostop's own, goes to zero as before."""
    fake, get = api
    eks, s3 = aws
    spec = {**SPEC, "node_groups": ["p3-20270115"], "suspend_at_deadline": True}
    fake.jobs = [k8s_job("stuck"), k8s_job("resnet", done=("Complete", "2027-01-15T09:00:00Z")),
                 k8s_job("broken", done=("Failed", "2027-01-15T09:10:00Z")), k8s_job("waiting", suspend=True),
                 k8s_job("run-007-gate", component="gate"), k8s_job("elsewhere", run="run-006")]
    clock = Clock(minutes=230)
    assert autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=2) == []
    assert fake.patches == []  # before the deadline: nothing suspended
    records = autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=40)
    assert len(records) == 1, records  # once: a suspended Job is not suspended again
    assert fake.patches == [("run-007-gate", {"spec": {"suspend": True}}), ("stuck", {"spec": {"suspend": True}})]
    jobs = {j["metadata"]["name"]: j for j in fake.jobs}
    assert jobs["resnet"]["status"]["conditions"][0]["type"] == "Complete" and not jobs["resnet"]["spec"]["suspend"]
    assert not jobs["broken"]["spec"]["suspend"] and not jobs["elsewhere"]["spec"]["suspend"]
    assert sizes(eks, "p3-20270115") == {"minSize": 0, "maxSize": 2, "desiredSize": 0}
    assert sizes(eks, "g5-20270115") == {"minSize": 0, "maxSize": 1, "desiredSize": 1}  # the autoscaler's to size
    record = json.loads(s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read())
    assert record["suspended_jobs"] == ["run-007-gate", "stuck"] and "deadline passed" in record["reason"]
    assert [g["name"] for g in record["node_groups"]] == ["p3-20270115"]


def test_with_every_gpu_group_autoscaled_the_deadline_still_suspends_and_records_it(api, aws):
    fake, get = api
    eks, s3 = aws
    spec = {**SPEC, "node_groups": [], "suspend_at_deadline": True}
    fake.jobs = [k8s_job("stuck")]
    clock = Clock(minutes=241)
    [record] = autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=3)
    assert record["suspended_jobs"] == ["stuck"] and record["node_groups"] == []
    assert fake.jobs[0]["spec"]["suspend"] is True
    assert {sizes(eks, g)["desiredSize"] for g in ("p3-20270115", "g5-20270115")} == {2, 1}


def test_an_api_error_is_retried_not_fatal(api, aws, tmp_path):
    _, get = api
    eks, s3 = aws
    broken = functools.partial(gate.request, api="http://127.0.0.1:9", sa=f"{tmp_path}/")  # discard port: refused
    clock = Clock(minutes=0)
    assert autostop.run(SPEC, get=broken, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=2) == []
    assert sizes(eks, "p3-20270115")["desiredSize"] == 2


def test_a_group_at_zero_that_the_runs_waiting_jobs_need_gets_its_configured_size_back(api, aws):
    """The window the owner ConfigMap cannot close: the previous run's controller scaled the groups between
    pulumi up's refresh and its new generation, so Pulumi saw no change to make. The new run's controller
    sees its Jobs waiting and the groups at zero, and puts their configured sizes back."""
    fake, get = api
    eks, s3 = aws
    for group in ("p3-20270115", "g5-20270115"):
        autostop.scale_to_zero(eks, CLUSTER, group)
    spec = {**SPEC, "sizes": [{"minSize": 0, "maxSize": 2, "desiredSize": 2}, {"minSize": 0, "maxSize": 1,
                                                                              "desiredSize": 1}]}
    fake.jobs = [k8s_job("resnet")]  # created, not finished: its pods wait for GPU nodes
    clock = Clock(minutes=20)
    assert autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=1) == []
    assert sizes(eks, "p3-20270115") == {"minSize": 0, "maxSize": 2, "desiredSize": 2}
    assert sizes(eks, "g5-20270115") == {"minSize": 0, "maxSize": 1, "desiredSize": 1}
    # A group set to zero while the Jobs already ran (bench run --keep after Ctrl-C): left at zero.
    autostop.scale_to_zero(eks, CLUSTER, "p3-20270115")
    created = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=30)  # before the scale-down
    fake.jobs = [k8s_job("resnet", created=created.strftime("%Y-%m-%dT%H:%M:%SZ"))]
    before_deadline = lambda: created.timestamp() + 20 * 60  # noqa: E731
    assert autostop.run(spec, get=get, eks=eks, s3=s3, clock=before_deadline, sleep=lambda s: None, rounds=1) == []
    assert sizes(eks, "p3-20270115")["desiredSize"] == 0
    # Finished and idle past the limit: scaled to zero as before, and not restored after.
    fake.jobs = [k8s_job("resnet", done=("Complete", "2027-01-15T08:22:00Z"))]
    clock = Clock(minutes=40)
    assert len(autostop.run(spec, get=get, eks=eks, s3=s3, clock=clock, sleep=clock.sleep, rounds=3)) == 1
    assert sizes(eks, "p3-20270115")["desiredSize"] == 0


def test_a_run_of_many_jobs_is_read_page_by_page_and_only_what_its_state_needs_is_kept(api):
    """1,024 runs are over 2,000 Jobs: one answer holding them all was tens of MB in a controller of 256 MiB."""
    fake, get = api
    fake.jobs = [k8s_job(f"run-{i}", suspend=i % 2 == 1) for i in range(2 * autostop.JOBS_PAGE + 50)]
    fake.jobs.append(k8s_job("other", run="another-run"))
    jobs = autostop.list_jobs(SPEC, get)
    assert [j["metadata"]["name"] for j in jobs] == [f"run-{i}" for i in range(2 * autostop.JOBS_PAGE + 50)]
    assert len(fake.requests) == 3 and all(f"&limit={autostop.JOBS_PAGE}" in r for r in fake.requests)
    assert [job_state(j) for j in jobs] == [job_state(j) for j in fake.jobs[:-1]]
    assert all(set(j["spec"]) == {"suspend"} and "namespace" not in j["metadata"] for j in jobs)
