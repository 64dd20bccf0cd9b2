"""Every Job of both shipped stacks, its pods run in the sandbox as the cluster would run them:
staging from S3 onto the shared claim, two-pod Indexed training through etcd-v2 rendezvous and a
gloo process group, evaluation, and the EFA pod spec on FSx; each leaves its summary, metrics and
logs under the results prefix the stack exports."""

from __future__ import annotations

import json

import pytest

from tests.support.sandbox_cluster import GATE_SKIPPED

pytestmark = [pytest.mark.cpu_capability, pytest.mark.local_run]  # the pods train amp-fp16 in this CPU's choice


def job_named(cluster, suffix):
    return next(job for name, job in cluster.jobs() if name.endswith(suffix))


def result(cluster, name):
    r = cluster.results[name]
    assert not isinstance(r, str), r
    assert r.succeeded, (r.reason, r.failures())
    return r


def assert_results(cluster, uri, *, nodes):
    objects = cluster.objects_under(uri)
    assert "summary.json" in objects, sorted(objects)
    summary = json.loads(cluster.read(uri + "summary.json"))
    assert summary["status"] == "succeeded", summary.get("error")
    assert sum(k.startswith("metrics/rank-") for k in objects) >= 1, sorted(objects)
    assert sum(k.startswith("logs/") for k in objects) >= nodes, sorted(objects)
    return summary


def test_dev_staging_copies_the_dataset_onto_the_claim(dev_cluster):
    r = result(dev_cluster, "staging-cifar10")
    assert r.reason == "Complete" and len(r.pods) == 1
    staged = dev_cluster.world.shared / "datasets" / "cifar10"
    assert (staged / "manifest.json").is_file()
    assert staged.stat().st_uid == 10001  # created through the EFS access point


def test_dev_training_runs_two_pods_that_rendezvous(dev_cluster, dev_plan, cpu_mixed_precision):
    r = result(dev_cluster, "experiments-resnet50-synthetic-job")
    assert r.reason == "Complete" and sorted(p.index for p in r.pods) == [0, 1], [p.failure for p in r.pods]
    assert len({p.node for p in r.pods}) == 2  # one node each: the Job's pod anti-affinity
    uri = dev_plan.outputs["experiment_results"]["resnet50-synthetic"]
    summary = assert_results(dev_cluster, uri, nodes=2)
    assert summary["throughput"]["processes"] == 2  # both pods in one process group
    # the Job asks for the cloud's amp-fp16; CPU processes train in what this CPU runs fast
    assert (summary["config"]["precision"], summary["precision"]) == ("amp-fp16", cpu_mixed_precision)


def test_dev_elastic_training_and_evaluation(dev_cluster, dev_plan):
    r = result(dev_cluster, "experiments-cifar10-elastic-job")
    assert r.reason == "SuccessPolicy", r.reason  # index 0 succeeded: the Job's success policy
    uri = dev_plan.outputs["experiment_results"]["cifar10-elastic"]
    assert_results(dev_cluster, uri, nodes=1)
    result(dev_cluster, "experiments-cifar10-elastic-eval")
    objects = dev_cluster.objects_under(uri + "eval/")
    assert "eval.json" in objects and "summary.json" in objects, sorted(objects)


def test_gates_are_skipped_for_want_of_an_api_server(dev_cluster):
    gates = [n for n, j in dev_cluster.jobs() if j["metadata"]["labels"]["app.kubernetes.io/component"] == "gate"]
    assert gates and all(dev_cluster.results[n] == GATE_SKIPPED for n in gates)


def test_fsx_staging_finds_the_imported_dataset(fsx_cluster):
    r = result(fsx_cluster, "staging-imagenet")
    assert r.reason == "Complete"


def test_fsx_efa_training_writes_its_results(fsx_cluster, fsx_plan):
    job = job_named(fsx_cluster, "resnet50-synthetic-job")
    spec = job["spec"]["template"]["spec"]
    main = spec["containers"][0]
    assert main["securityContext"]["runAsUser"] == 0 and main["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert "vpc.amazonaws.com/efa" in main["resources"]["limits"]
    assert [c["name"] for c in spec["initContainers"]] == ["volume-owner"]
    result(fsx_cluster, "experiments-resnet50-synthetic-job")
    uri = fsx_plan.outputs["experiment_results"]["resnet50-synthetic"]
    ran = assert_results(fsx_cluster, uri, nodes=2)["what_ran"]  # the Job's facts, through the launcher
    zone = {e["name"]: e.get("value") for e in main["env"]}["EKSBENCH_ZONE"]  # the one zone the program chose
    assert (ran["instance_type"], ran["node_group"], ran["placement_group"], ran["zone"]) == (
        "p5.48xlarge", "p5", "cluster", zone) and zone
    results = fsx_cluster.world.shared / "results" / "run-001" / "resnet50-synthetic"
    assert results.stat().st_uid == 0  # handed to the EFA pods' root by the init container
