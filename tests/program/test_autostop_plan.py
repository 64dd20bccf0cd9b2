"""The autostop controller in the plans of both example stacks: its role, RBAC, NetworkPolicy and
Deployment, each scoped as tightly as it can be (workloads/autostop_component.py)."""

from __future__ import annotations

import copy
import json

import pytest

from core.catalog.pins import STAGING_IMAGE
from core.contract.names import AUTOSTOP_OWNER_CONFIG_MAP
from infra.environment import SYSTEM_NODE_LABEL
from program.offline import evaluate, evaluate_config
from tests.program.test_program import DEV, P5_FILLED
from tests.support.k8s_schema import schema_errors


@pytest.fixture(scope="module", params=["dev", "p5-fsx"])
def plan(request):
    return evaluate("dev") if request.param == "dev" else evaluate_config("p5-fsx", P5_FILLED)


def one(plan, typ, name):
    found = [r for r in plan.resources if r["type"] == typ and r["name"] == name]
    assert len(found) == 1, [r["name"] for r in plan.resources if r["type"] == typ]
    return found[0]["inputs"]


def outputs(plan):
    return plan.outputs if isinstance(plan.outputs, dict) else dict(plan.outputs)


def test_the_role_may_resize_this_clusters_node_groups_and_write_one_key(plan):
    cluster = outputs(plan)["cluster_name"]
    trust = json.loads(one(plan, "aws:iam/role:Role", "autostop-role")["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    statements = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "autostop-policy")["policy"])["Statement"]
    assert [(s["Action"], s["Resource"]) for s in statements] == [
        (["eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"],
         f"arn:aws:eks:{outputs(plan)['region']}:123456789012:nodegroup/{cluster}/*"),
        ("s3:PutObject", outputs(plan)["results_prefix"].replace("s3://", "arn:aws:s3:::") + "autostop.json")]
    association = one(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "autostop-association")
    assert (association["serviceAccount"], association["clusterName"]) == ("eksbench-autostop", cluster)


def test_rbac_reads_jobs_of_the_namespace_and_the_owner_config_map_only(plan):
    role = one(plan, "kubernetes:rbac.authorization.k8s.io/v1:Role", "autostop-rbac-role")
    assert role["metadata"]["namespace"] == "eksbench"
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
                             {"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": [AUTOSTOP_OWNER_CONFIG_MAP], "verbs": ["get"]}]
    binding = one(plan, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "autostop-rbac-binding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "eksbench-autostop", "namespace": "eksbench"}]


@pytest.fixture(scope="module")
def autoscaled():
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:gpu_node_groups"][0]["autoscale"] = True
    return evaluate_config("p5-fsx", config)


def test_with_an_autoscaled_group_it_may_also_patch_jobs_of_the_namespace_to_suspend_them(autoscaled):
    role = one(autoscaled, "kubernetes:rbac.authorization.k8s.io/v1:Role", "autostop-rbac-role")
    assert role["metadata"]["namespace"] == "eksbench"  # a Role: this namespace's Jobs, no other
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"],
                              "verbs": ["get", "list", "watch", "patch"]},
                             {"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": [AUTOSTOP_OWNER_CONFIG_MAP], "verbs": ["get"]}]
    deployment = one(autoscaled, "kubernetes:apps/v1:Deployment", "autostop-deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    spec = json.loads(env["EKSBENCH_AUTOSTOP"])
    assert spec["suspend_at_deadline"] is True and spec["node_groups"] == spec["sizes"] == []


def test_network_policy_lets_nothing_in_and_only_dns_https_and_the_pod_identity_agent_out(plan):
    spec = one(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "autostop-network-policy")["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "eksbench-autostop"}}
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"] and not spec.get("ingress")
    ports = sorted((p["protocol"], int(p["port"])) for rule in spec["egress"] for p in rule["ports"])
    assert ports == [("TCP", 53), ("TCP", 80), ("TCP", 443), ("UDP", 53)]
    agent = [r for r in spec["egress"] if r["ports"][0]["port"] == 80][0]
    assert agent["to"] == [{"ipBlock": {"cidr": "169.254.170.23/32"}}]


def test_the_deployment_runs_the_shipped_code_on_the_system_nodes_and_watches_the_gpu_groups(plan):
    deployment = one(plan, "kubernetes:apps/v1:Deployment", "autostop-deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_LABEL and pod["serviceAccountName"] == "eksbench-autostop"
    (container,) = pod["containers"]
    assert container["image"] == STAGING_IMAGE and "workloads.train.control.autostop" in container["command"][-1]
    env = {e["name"]: e.get("value") for e in container["env"]}
    spec = json.loads(env["EKSBENCH_AUTOSTOP"])
    gpu_groups = outputs(plan)["node_groups"][1:]  # the system group is first, and never scaled
    assert spec["node_groups"] == gpu_groups and spec["cluster"] == outputs(plan)["cluster_name"]
    assert spec["suspend_at_deadline"] is False  # no autoscaled group: it never writes to a Job
    assert f"s3://{spec['bucket']}/{spec['key']}" == outputs(plan)["results_prefix"] + "autostop.json"


def test_the_controllers_objects_pass_the_kubernetes_schema():
    from workloads import autostop_manifests as m
    from workloads.code_manifests import code_config_map_manifest

    code = code_config_map_manifest({"workloads/train/control/autostop.py": "pass"}, namespace="eksbench")
    spec = m.autostop_spec(namespace="eksbench", run_id="run-001", cluster="eksbench-dev", node_groups=["p3-1"],
                           region="us-west-2", bucket="b", key="eksbench/dev/run-001/autostop.json",
                           deadline_minutes=330, idle_minutes=5, generation="0123456789abcdef")
    objects = [*m.autostop_rbac_manifests("eksbench"), m.autostop_network_policy_manifest("eksbench"),
               m.owner_config_map_manifest(namespace="eksbench", generation="0123456789abcdef", run_id="run-001"),
               m.autostop_deployment_manifest(namespace="eksbench", spec=spec, code_config_map=code)]
    assert [e for o in objects for e in schema_errors(o)] == []


def test_the_dev_deadline_is_the_sequential_budgets_plus_a_margin():
    deployment = one(evaluate("dev"), "kubernetes:apps/v1:Deployment", "autostop-deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    spec = json.loads(env["EKSBENCH_AUTOSTOP"])
    # resnet50 60 min + 60 slack; cifar10 90 min + 30 evaluation + 60 slack; 30 margin.
    assert (spec["deadline_minutes"], spec["idle_minutes"]) == (120 + 180 + 30, 5)


def test_autostop_disabled_builds_no_controller():
    config = copy.deepcopy(DEV)
    config["eksbench:autostop"] = {"enabled": False}
    plan = evaluate_config("dev", config)
    assert not [r for r in plan.resources if r["name"].startswith("autostop")]


def test_the_cost_after_autostop_is_everything_but_the_gpu_nodes(plan):
    from infra.cluster.estimate import cost_after_autostop

    assert cost_after_autostop({"gpu nodes p3 (2x p3.16xlarge)": 48.96, "system nodes (2x m6i.large)": 0.192,
                                "EKS control plane": 0.1, "NAT gateways (1)": 0.045}) == 0.34
    assert 0 < outputs(plan)["hourly_cost_after_autostop_usd"] < outputs(plan)["estimated_hourly_cost_usd"] / 10


def generation_of(plan) -> tuple[str, str]:
    """(the owner ConfigMap's generation, the controller's), from the plan."""
    owner = one(plan, "kubernetes:core/v1:ConfigMap", "autostop-owner")
    deployment = one(plan, "kubernetes:apps/v1:Deployment", "autostop-deployment")
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    return owner["data"]["generation"], json.loads(env["EKSBENCH_AUTOSTOP"])["generation"]


def test_the_gpu_groups_wait_for_the_generation_the_controller_serves(plan):
    """pulumi up records the new generation before it restores the GPU groups' sizes (their dependency), so the
    previous run's controller stands down before the groups come back (workloads.train.control.autostop)."""
    owner = [r for r in plan.resources if r["type"] == "kubernetes:core/v1:ConfigMap" and r["name"] == "autostop-owner"]
    gpu = [r for r in plan.resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"].startswith("gpu-")]
    assert gpu and all(owner[0]["urn"] in r["dependencies"] for r in gpu)
    system = one(plan, "aws:eks/nodeGroup:NodeGroup", "system-ng")
    assert owner[0]["urn"] not in [d for r in plan.resources if r["name"] == "system-ng" for d in r["dependencies"]]
    assert system  # the system group serves every run: it never waits for one
    recorded, served = generation_of(plan)
    assert recorded == served and len(recorded) == 16


def test_a_new_run_or_new_code_is_a_new_generation_and_a_plain_rerun_is_not():
    base = generation_of(evaluate("dev"))[0]
    assert generation_of(evaluate("dev"))[0] == base
    rerun = copy.deepcopy(DEV)
    rerun["eksbench:run_id"] = "run-002"
    assert generation_of(evaluate_config("dev", rerun))[0] != base
    changed = copy.deepcopy(DEV)
    changed["eksbench:experiments"][0]["steps"] = changed["eksbench:experiments"][0].get("steps", 100) + 1
    assert generation_of(evaluate_config("dev", changed))[0] != base
