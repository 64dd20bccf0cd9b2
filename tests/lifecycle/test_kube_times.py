"""bench/cloud/kube.py's timeline marks from the API's JSON: the first container start, the GPU nodes' Ready."""

from __future__ import annotations

from bench.cloud import kube
from bench.results.timeline import parse_iso
from infra.environment import GPU_TAINT


def pod(*states):
    return {"status": {"containerStatuses": [{"name": f"c{i}", "state": s} for i, s in enumerate(states)]}}


def node(ready_at, *, gpu=True, status="True"):
    return {"spec": {"taints": [dict(GPU_TAINT)] if gpu else []},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False",
                                       "lastTransitionTime": "2026-11-24T00:00:00Z"},
                                      {"type": "Ready", "status": status, "lastTransitionTime": ready_at}]}}


def test_the_first_container_start_of_running_or_finished_pods():
    pods = [pod({"waiting": {"reason": "ContainerCreating"}}),
            pod({"running": {"startedAt": "2026-11-24T00:05:00Z"}}),
            pod({"terminated": {"startedAt": "2026-11-24T00:04:00Z", "exitCode": 0}})]
    assert kube.containers_started_at(pods) == parse_iso("2026-11-24T00:04:00Z")
    assert kube.containers_started_at([pod({"waiting": {}})]) is None


def test_gpu_nodes_are_ready_when_the_last_expected_one_is():
    nodes = [node("2026-11-24T00:03:00Z"), node("2026-11-24T00:01:00Z", gpu=False),
             node("2026-11-24T00:02:00Z"), node("2026-11-24T00:09:00Z", status="False")]
    assert kube.gpu_nodes_ready_at(nodes, 2) == parse_iso("2026-11-24T00:03:00Z")
    assert kube.gpu_nodes_ready_at(nodes, 3) is None  # the third GPU node is not Ready yet
    assert kube.gpu_nodes_ready_at(nodes, 0) is None
