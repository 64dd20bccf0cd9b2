"""Preflight on a stack that is up: a ``pulumi up`` that would roll a node group under active Jobs asks first.

The stack's outputs come from the fake CLI (``tests/support/fake_pulumi.py``), the rest of preflight from moto; the
Kubernetes API and ``pulumi preview``'s engine events are stood in for.
"""

from __future__ import annotations

import json

import pytest
from pulumi.automation import events as ev
from pulumi.automation._stack import Stack

from bench.cloud import kube, node_group_updates, preflight
from core.config.autostop import running_jobs

pytestmark = pytest.mark.local_run

GPU_NG = "urn:pulumi:lc::eksbench::eksbench:infra:EksCluster$aws:eks/nodeGroup:NodeGroup::gpu-g5-ng"
GPU_LT = "urn:pulumi:lc::eksbench::eksbench:infra:EksCluster$aws:ec2/launchTemplate:LaunchTemplate::gpu-g5-lt"
JOB = "urn:pulumi:lc::eksbench::eksbench:workloads:ExperimentSuite$kubernetes:batch/v1:Job::alpha-job"


def step(op, urn, diffs=()):
    """An engine event of ``pulumi preview``: the step it plans for one resource."""
    typ = urn.split("::")[2].rsplit("$", 1)[-1]
    meta = ev.StepEventMetadata(op=ev.OpType(op), urn=urn, type=typ, provider="", diffs=list(diffs))
    return ev.EngineEvent(sequence=0, timestamp=0, resource_pre_event=ev.ResourcePreEvent(metadata=meta))


def job(name, finished=None, suspend=False):
    return {"metadata": {"name": name}, "spec": {"suspend": suspend},
            "status": {"conditions": [{"type": finished, "status": "True"}] if finished else []}}


ACTIVE = [job("alpha-r0"), job("beta-r0"), job("eval-r0", suspend=True), job("old-r0", finished="Complete")]


def test_what_drains_nodes_is_a_template_change_or_a_rollout_of_a_group_not_a_resize():
    assert node_group_updates.rolled([step("update", GPU_LT), step("update", GPU_NG, ["launchTemplate"])]) == [
        "gpu-g5-lt", "gpu-g5-ng"]
    assert node_group_updates.rolled([step("replace", GPU_NG), step("update", GPU_NG, ["version"])]) == ["gpu-g5-ng"]
    assert node_group_updates.rolled([step("update", GPU_NG, ["scalingConfig", "tags"]), step("same", GPU_LT),
                                      step("replace", JOB), step("create", GPU_LT)]) == []
    assert running_jobs(ACTIVE) == ["alpha-r0", "beta-r0"]  # suspended and finished hold no pod


@pytest.fixture
def up_stack(project, monkeypatch):
    """Stack ``lc`` up on the fake CLI with a cluster; the API lists ``jobs``; preview plans ``steps``."""
    for k, v in project.env().items():
        monkeypatch.setenv(k, v)
    project.write_stack()
    kubeconfig = {"clusters": [{"cluster": {"server": "https://eks.example"}}]}
    project.state.mkdir(parents=True, exist_ok=True)
    (project.state / "state.json").write_text(json.dumps({"stacks": {"lc": {
        "resources": [], "outputs": project.outputs(kubeconfig=kubeconfig), "history": []}}}))
    seen = {"jobs": list(ACTIVE), "steps": [step("update", GPU_LT), step("update", GPU_NG, ["launchTemplate"])],
            "previews": 0}

    class Client:
        def __init__(self, access):
            assert access.server == "https://eks.example"

        def jobs(self, namespace, selector=""):
            if isinstance(seen["jobs"], Exception):
                raise seen["jobs"]
            return seen["jobs"]

    def preview(self, on_event=None, **kwargs):
        seen["previews"] += 1
        assert kwargs.get("refresh")  # the sizes set outside Pulumi read back, as up reads them
        for e in seen["steps"]:
            on_event(e)

    monkeypatch.setattr(kube, "KubeClient", Client)
    monkeypatch.setattr(Stack, "preview", preview)
    return project, seen


def run_preflight(project, confirm):
    lines = []
    ready = preflight.preflight("lc", project.dir, max_cost=None, results_root=project.results, resume=False,
                                log=lines.append, confirm=confirm)
    return ready, lines


def test_a_template_change_under_active_jobs_is_refused_in_one_line_unless_accepted(up_stack):
    project, seen = up_stack
    asked = []
    with pytest.raises(preflight.Refusal) as e:
        run_preflight(project, lambda lines: asked.append(lines) or len(asked) == 1)  # yes to the run, no to this
    line = str(e.value)
    assert "\n" not in line and asked[1] == [line]
    assert line.startswith("pulumi up -s lc would update gpu-g5-lt, gpu-g5-ng: EKS drains every node")
    assert "2 active Job(s) in namespace" in line and "(alpha-r0, beta-r0)" in line and "restart from step 0" in line
    assert line.endswith("wait for them to finish, or pass --yes to accept the restart")

    _, lines = run_preflight(project, lambda lines: True)  # --yes
    assert lines[-1] == "preflight: node groups: 2 active Job(s) restart, as accepted"


def test_no_active_job_no_rollout_or_no_answer_goes_on_without_a_question(up_stack):
    project, seen = up_stack
    asked = []

    def confirm(lines):
        asked.append(lines)
        return len(asked) == 1

    seen["steps"] = [step("update", GPU_NG, ["scalingConfig"])]  # --keep's zero sizes put back: no rollout
    assert run_preflight(project, confirm)[1][-1] == (
        "preflight: node groups: pulumi up rolls none; 2 active Job(s) in eksbench go on")
    seen["jobs"], seen["previews"], asked[:] = [job("old-r0", finished="Failed")], 0, []
    assert run_preflight(project, confirm)[1][-1] == "preflight: node groups: no active Job in eksbench"
    assert seen["previews"] == 0  # nothing previewed where nothing runs
    seen["jobs"], asked[:] = ConnectionRefusedError("private endpoint"), []
    assert "the Kubernetes API does not answer (ConnectionRefusedError)" in run_preflight(project, confirm)[1][-1]
    (project.state / "state.json").unlink()  # a stack not created yet
    asked[:] = []
    assert run_preflight(project, confirm)[1][-1] == "preflight: node groups: a new stack, nothing running on it"


def test_eksbench_up_asks_the_same_question_before_it_rolls_a_node_group(up_stack, monkeypatch):
    """up (``bench.automation.up``, ``eksbench up``) went straight to pulumi up, rolling the group under the Jobs."""
    from bench import automation
    from bench.cloud import confirm

    project, seen = up_stack
    asked = []
    monkeypatch.setattr(confirm, "ask", lambda lines, **kw: asked.append(lines) or len(asked) == 1)
    with pytest.raises(automation.AutomationError) as e:
        automation.up("lc", project.dir, on_output=None, yes=False)
    assert str(e.value).startswith("pulumi up -s lc would update gpu-g5-lt, gpu-g5-ng") and asked[1] == [str(e.value)]
    assert seen["previews"] == 1
