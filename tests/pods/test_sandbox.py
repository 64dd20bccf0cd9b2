"""The sandbox itself: a pod's container cannot write outside its volumes, a UID without write access
cannot write, a dropped capability is gone, and a pod that fails for such a reason fails naming the
Job, the pod, the container and the path (or module, variable, name)."""

from __future__ import annotations

import copy
import os

import pytest

from tests.support.sandbox_cluster import SandboxCluster

# the shipped stacks' plans scaled down; their pods train here
pytestmark = [pytest.mark.cpu_capability, pytest.mark.local_run]

CAP_CHOWN = 0  # linux/capability.h


@pytest.fixture(scope="module")
def bare(dev_plan, tmp_path_factory):
    """The dev plan's world with no Job run yet."""
    from tests.pods.conftest import _need_tools

    _need_tools()
    with SandboxCluster(dev_plan, tmp_path_factory.mktemp("bare")) as cluster:
        yield cluster


def staging_pod(cluster, script: str, *, security=None) -> dict:
    """The dev staging Job (UID 10001, no capabilities, read-only root, the claim at a subPath) running
    ``script`` with this machine's python3 instead of its command."""
    job = copy.deepcopy(next(j for n, j in cluster.jobs() if n.startswith("staging-")))
    job["spec"]["backoffLimit"] = 0
    c = job["spec"]["template"]["spec"]["containers"][0]
    c["command"], c["args"] = ["python3", "-c", script], []
    if security:
        c["securityContext"] = {**c["securityContext"], **security}
    return job


def failure(cluster, job) -> str:
    r = cluster.run(job)
    assert not r.succeeded and len(r.failures()) == 1, (r.reason, r.failures())
    return r.failures()[0]


def named(text: str, *words: str) -> None:
    for w in ("Job stage-cifar10", "pod stage-cifar10-", "container stage", *words):
        assert w in text, (w, text)


def test_writing_outside_the_volumes_fails_naming_the_path(bare):
    text = failure(bare, staging_pod(bare, "open('/etc/eksbench-probe', 'w')"))
    named(text, "write under the read-only root", "/etc/eksbench-probe")
    assert not os.path.exists("/etc/eksbench-probe")


def test_a_uid_without_write_access_fails_naming_the_path(bare):
    locked = bare.world.shared / "datasets" / "cifar10" / "locked"
    locked.mkdir(parents=True)
    os.chmod(locked, 0o755)  # root-owned: UID 10001 is an "other" here
    text = failure(bare, staging_pod(bare, "open('/data/datasets/cifar10/locked/x', 'w')"))
    named(text, "permission denied", "/data/datasets/cifar10/locked/x")


def test_a_dropped_capability_is_gone(bare):
    # Root with every capability dropped but CHOWN (the FSx volume-owner's context): CapEff holds CHOWN
    # only, and without CAP_DAC_OVERRIDE root cannot write a folder another UID owns 0755.
    script = ("import os; eff = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1]\n"
              f"assert int(eff, 16) == 1 << {CAP_CHOWN}, eff\n"
              "os.mkdir('/tmp/theirs', 0o755); os.chown('/tmp/theirs', 10001, 10001)\n"
              "open('/tmp/theirs/x', 'w')")
    job = staging_pod(bare, script, security={"runAsUser": 0, "runAsNonRoot": False,
                                              "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}})
    c = job["spec"]["template"]["spec"]["containers"][0]
    c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "shared"]  # EFS would squash root
    text = failure(bare, job)
    named(text, "permission denied", "/tmp/theirs/x")


def test_a_non_root_container_has_no_capabilities(bare):
    script = ("caps = {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/self/status')\n"
              "        if l.startswith('Cap')}\n"
              "status = open('/proc/self/status').read()\n"
              "assert caps['CapEff'] == caps['CapPrm'] == caps['CapBnd'] == 0, caps\n"
              "assert 'NoNewPrivs:\\t1' in status\n"
              "import os; assert (os.getuid(), os.getgid()) == (10001, 10001) and 10001 in os.getgroups()")
    r = bare.run(staging_pod(bare, script))
    assert r.succeeded, r.failures()


@pytest.mark.parametrize("script, words", [
    ("import eksbench_no_such_module", ("missing module", "eksbench_no_such_module")),
    ("import os; os.environ['EKSBENCH_NOT_SET']", ("missing env variable", "EKSBENCH_NOT_SET")),
    ("import socket; socket.create_connection(('etcd-typo.eksbench.svc.cluster.local', 2379))",
     ("unresolved name", "etcd-typo.eksbench.svc.cluster.local")),
], ids=["module", "env", "name"])
def test_a_missing_module_env_or_name_fails_naming_it(bare, script, words):
    named(failure(bare, staging_pod(bare, script)), *words)


def test_services_and_pods_resolve_inside(bare):
    script = ("import socket\n"
              "for n in ('etcd.eksbench.svc.cluster.local',\n"
              "          'resnet50-synthetic-run-001-1.resnet50-synthetic-run-001'):\n"
              "    print(n, socket.gethostbyname(n))\n"
              "socket.create_connection(('etcd.eksbench.svc.cluster.local', 2379)).close()")
    r = bare.run(staging_pod(bare, script))
    assert r.succeeded, r.failures()


def test_a_pod_killed_at_its_deadline_leaves_a_summary_that_says_so(bare, dev_plan):
    """activeDeadlineSeconds ends the Job: its pods get SIGTERM (then SIGKILL after the grace period),
    and the launcher still writes and uploads a failed summary naming the signal."""
    import json

    name, job = next((n, j) for n, j in bare.jobs() if n == "experiments-cifar10-elastic-job")
    job = copy.deepcopy(job)
    job["spec"]["activeDeadlineSeconds"] = 6
    r = bare.run(job, name="deadline")
    assert r.reason == "DeadlineExceeded" and not r.succeeded, r.reason
    uri = dev_plan.outputs["experiment_results"]["cifar10-elastic"]
    summary = json.loads(bare.read(uri + "summary.json"))
    # a pod cannot tell a Job's deadline from a drain or a deletion: a SIGTERM from outside, recorded as such
    assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM", {
        k: summary.get(k) for k in ("status", "signal", "error")}
    assert summary["stop_reason"].startswith("SIGTERM: from outside (a Job's deadline")


def test_a_stack_files_args_reach_the_pods_trainer_as_written(bare):
    """The dev plan's training pod with hostile ``args``, run in the sandbox as the kubelet starts it: the command
    the launcher ran (its summary's ``command``) has the args exactly as the stack file has them."""
    import json

    import yaml

    from program.stack_files import ROOT
    from tests.pods.conftest import scaled_plan
    from tests.pods.test_container_args import HOSTILE
    from tests.support.plan_manifests import kubernetes_objects

    config = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    first = config["eksbench:experiments"][0]
    config["eksbench:experiments"] = [{**first, "nodes": 1, "max_restarts": 0, "args": HOSTILE}]
    plan = scaled_plan("dev", config)
    job = dict(kubernetes_objects(plan.resources))[f"experiments-{first['name']}-job"]
    r = bare.run(job, name="hostile-args")
    assert not r.succeeded  # the trainer refuses --lr=$(EKSBENCH_EXPERIMENT) (not a number), after the launcher has recorded what it ran
    summary = json.loads(bare.read(plan.outputs["experiment_results"][first["name"]] + "summary.json"))
    command = summary["command"]
    at = command.index(HOSTILE[0])
    assert command[at:at + len(HOSTILE)] == HOSTILE, command
