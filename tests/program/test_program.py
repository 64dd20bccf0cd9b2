"""The whole program under Pulumi's mock engine: what `pulumi up` would register, checked."""

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pulumi
import pytest
import yaml

from core.config.fields import ConfigError
from infra.cluster.manifests import DEVICE_PLUGIN_IMAGE, ETCD_IMAGE
from infra.environment import GPU_TAINT
from program.mock_run import run_program
from program.mocks import EKS_CREATED_CLUSTER_SG, EksbenchMocks, RecordingMonitor
from program.offline import evaluate, evaluate_config
from program.stack_files import ROOT, read_stack_yaml
from tests.support.k8s_schema import schema_errors

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
# The p5 example with its placeholder filled in, as a user would before pulumi up, and its datasets
# read from a prefix of their own (datasets_uri) rather than the home stack's.
P5 = yaml.safe_load((ROOT / "Pulumi.p5-fsx.yaml").read_text())["config"]
P5_FILLED = {**P5, "eksbench:datasets_uri": "s3://team-datasets/datasets/",
             "eksbench:cluster": {**P5["eksbench:cluster"], "public_access_cidrs": ["198.18.7.0/32"]}}
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


@pytest.fixture(scope="module")
def dev():
    return evaluate("dev")


@pytest.fixture(scope="module")
def fsx():
    return evaluate_config("p5-fsx", P5_FILLED)


def of_type(plan, typ):
    return [r for r in plan.resources if r["type"] == typ]


def one(plan, typ, name=None):
    found = [r for r in of_type(plan, typ) if name is None or r["name"] == name]
    assert len(found) == 1, [r["name"] for r in found]
    return found[0]


def pod_specs(plan):
    for r in plan.resources:
        spec = r["inputs"].get("spec") or {}
        template = (spec.get("template") or {}).get("spec")
        if template:
            yield r, template


def private_subnet_ids(plan):
    return {r["name"] + "-id" for r in of_type(plan, "aws:ec2/subnet:Subnet") if "-private-" in r["name"]}


def test_network_spans_three_azs_with_private_and_public_subnets(dev):
    subnets = of_type(dev, "aws:ec2/subnet:Subnet")
    assert len(subnets) == 6
    assert len({s["inputs"]["availabilityZone"] for s in subnets}) == 3
    assert not any(s["inputs"].get("mapPublicIpOnLaunch") for s in subnets)
    endpoint = one(dev, "aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint["inputs"]["serviceName"] == "com.amazonaws.us-west-2.s3"


def test_nodes_only_in_private_subnets(dev):
    private = private_subnet_ids(dev)
    groups = of_type(dev, NODE_GROUP)
    assert len(groups) == 2
    for g in groups:
        assert set(g["inputs"]["subnetIds"]) <= private, g["name"]
    cluster = one(dev, "eks:index:Cluster")
    assert cluster["inputs"]["nodeAssociatePublicIpAddress"] is False


def test_cluster_uses_api_auth_private_endpoint_and_no_default_group(dev):
    c = one(dev, "eks:index:Cluster")["inputs"]
    assert c["authenticationMode"] == "API"
    assert c["endpointPrivateAccess"] is True and c["skipDefaultNodeGroup"] is True
    assert c["version"] == DEV["eksbench:cluster"]["kubernetes_version"]
    assert c["publicAccessCidrs"] == DEV["eksbench:cluster"]["public_access_cidrs"]


def test_gpu_group_ami_taint_and_size(dev):
    gpu = one(dev, NODE_GROUP, "gpu-p3-ng")["inputs"]
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu["instanceTypes"] == ["p3.16xlarge"]
    assert gpu["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert gpu["scalingConfig"] == {"desiredSize": 2, "minSize": 0, "maxSize": 2}
    assert "diskSize" not in gpu  # with a launch template the disk is in the template
    template = one(dev, "aws:ec2/launchTemplate:LaunchTemplate", "gpu-p3-lt")["inputs"]
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] >= 100
    system = one(dev, NODE_GROUP, "system-ng")["inputs"]
    assert "taints" not in system or not system["taints"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD"


def test_gpu_taint_is_tolerated_by_every_pod_that_needs_a_gpu_node(dev):
    def tolerates(spec):
        return any(t.get("key") == GPU_TAINT["key"] and t.get("effect") == GPU_TAINT["effect"] and
                   (t.get("operator") == "Exists" or t.get("value") == GPU_TAINT["value"])
                   for t in spec.get("tolerations") or [])
    checked = 0
    for r, spec in pod_specs(dev):
        wants_gpu = any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})
                        for c in spec["containers"])
        if wants_gpu or r["type"] == "kubernetes:apps/v1:DaemonSet":
            assert tolerates(spec), r["name"]
            checked += 1
        else:
            assert not tolerates(spec), f"{r['name']} would land on GPU nodes"
    assert checked >= 3  # the device plugin and both training Jobs


def test_efs_mount_target_per_private_subnet_and_nfs_from_nodes_only(dev):
    targets = of_type(dev, "aws:efs/mountTarget:MountTarget")
    assert {t["inputs"]["subnetId"] for t in targets} == private_subnet_ids(dev)
    assert len(targets) == 3
    fs = one(dev, "aws:efs/fileSystem:FileSystem")["inputs"]
    assert fs["encrypted"] is True
    sg = one(dev, "aws:ec2/securityGroup:SecurityGroup", "storage-sg")["inputs"]
    assert not sg.get("ingress")
    rules = of_type(dev, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert [(r["inputs"]["fromPort"], r["inputs"]["toPort"], r["inputs"]["referencedSecurityGroupId"])
            for r in rules] == [(2049, 2049, EKS_CREATED_CLUSTER_SG)]
    assert "cidrIpv4" not in rules[0]["inputs"]


def test_fsx_associations_and_lustre_ports(fsx):
    fs = one(fsx, "aws:fsx/lustreFileSystem:LustreFileSystem")["inputs"]
    assert fs["deploymentType"] == "PERSISTENT_2" and fs["storageCapacity"] == 4800
    dras = {r["inputs"]["fileSystemPath"]: r["inputs"] for r in
            of_type(fsx, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")}
    assert dras["/datasets"]["dataRepositoryPath"] == "s3://team-datasets/datasets/"
    assert dras["/datasets"]["s3"]["autoImportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]
    # One writer per key: the export has its own prefix, never the launcher's <run-id>/ keys.
    assert dras["/results"]["dataRepositoryPath"] == \
        "s3://eksbench-home-us-east-1-20261122/eksbench/p5-fsx/fsx-export/"
    assert dras["/results"]["s3"]["autoExportPolicy"]["events"] == ["NEW", "CHANGED"]
    assert not of_type(fsx, "aws:efs/fileSystem:FileSystem")


def test_fsx_is_off_the_critical_path(fsx):
    types = [step["type"] for step in fsx.estimate["critical_path"]]
    assert "aws:fsx/lustreFileSystem:LustreFileSystem" not in types
    assert "eks:index:Cluster" in types


def test_efa_group_sits_in_one_az_placement_group(fsx):
    gpu = one(fsx, NODE_GROUP, "gpu-p5-ng")["inputs"]
    assert len(gpu["subnetIds"]) == 1
    template = one(fsx, "aws:ec2/launchTemplate:LaunchTemplate", "gpu-p5-lt")["inputs"]
    cards = template["networkInterfaces"]
    assert len(cards) == 32  # p5.48xlarge: one EFA per network card (the mock's DescribeInstanceTypes)
    assert [c["interfaceType"] for c in cards[:2]] == ["efa", "efa-only"]
    assert {c["deviceIndex"] for c in cards[1:]} == {1} and cards[0]["deviceIndex"] == 0
    assert all(c["securityGroups"] == [EKS_CREATED_CLUSTER_SG] for c in cards)
    placement = one(fsx, "aws:ec2/placementGroup:PlacementGroup")
    assert placement["inputs"]["strategy"] == "cluster"
    assert template["placement"]["groupName"] == placement["name"]


def test_dev_reads_the_home_bucket_and_creates_none(dev):
    """The home stack's bucket (tests/program/test_home.py) is read through a StackReference, never registered."""
    ref = one(dev, "pulumi:pulumi:StackReference")
    assert ref["read"] and ref["inputs"]["name"] == DEV["eksbench:results"]["home_stack"] == "organization/eksbench/home"
    assert not [r for r in dev.resources if r["type"].startswith(("aws:s3/", "aws:ecr/"))]


def test_existing_bucket_creates_no_bucket():
    config = copy.deepcopy(DEV)
    config["eksbench:results"] = {"bucket": "team-results"}
    plan = evaluate_config("dev", config)
    assert not [r for r in plan.resources if r["type"].startswith("aws:s3/")]
    assert plan.outputs["results_prefix"] == "s3://team-results/eksbench/dev/run-001/"


def test_trainer_policy_is_limited_to_datasets_and_results_prefixes(dev):
    policy = json.loads(one(dev, "aws:iam/rolePolicy:RolePolicy", "trainer-s3")["inputs"]["policy"])
    bucket = "eksbench-home-20261122"  # the home stack's, as the mock engine answers the StackReference
    resources = set()
    listing = [s for s in policy["Statement"] if s["Sid"] == "ListDatasets"][0]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["datasets/*"]}}
    for s in policy["Statement"]:
        assert s["Effect"] == "Allow"
        assert "*" not in json.dumps(s["Action"]).replace("s3:", "")
        resources.update([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    # Datasets from the home bucket's datasets/ (dev sets no datasets_uri).
    assert resources == {f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/datasets/*",
                         f"arn:aws:s3:::{bucket}/eksbench/dev/*"}
    writes = [s for s in policy["Statement"] if "s3:PutObject" in s["Action"]]
    assert [s["Resource"] for s in writes] == [f"arn:aws:s3:::{bucket}/eksbench/dev/*"]
    trust = json.loads(one(dev, "aws:iam/role:Role", "trainer-role")["inputs"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assoc = one(dev, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "trainer-association")["inputs"]
    assert (assoc["namespace"], assoc["serviceAccount"]) == ("eksbench", "eksbench-trainer")


def test_no_aws_keys_anywhere_in_the_cluster(dev):
    text = json.dumps([r["inputs"] for r in dev.resources if r["type"].startswith("kubernetes:")])
    assert "AWS_ACCESS_KEY_ID" not in text and "AWS_SECRET_ACCESS_KEY" not in text
    assert not of_type(dev, "kubernetes:core/v1:Secret")


def test_device_plugin_and_etcd_are_pinned_and_etcd_speaks_v2(dev):
    ds = one(dev, "kubernetes:apps/v1:DaemonSet")["inputs"]["spec"]["template"]["spec"]
    assert ds["containers"][0]["image"] == DEVICE_PLUGIN_IMAGE and ":v0." in DEVICE_PLUGIN_IMAGE
    etcd = one(dev, "kubernetes:apps/v1:Deployment", "etcd-deployment")["inputs"]["spec"]["template"]["spec"]
    assert etcd["containers"][0]["image"] == ETCD_IMAGE and ":v3.5." in ETCD_IMAGE
    assert "--enable-v2=true" in etcd["containers"][0]["command"]
    assert etcd["nodeSelector"] == {"eksbench.io/pool": "system"}
    for _, spec in pod_specs(dev):
        for c in spec["containers"] + spec.get("initContainers", []):
            assert ":" in c["image"].rsplit("/", 1)[-1] and not c["image"].endswith(":latest"), c["image"]


def test_efa_groups_get_the_efa_device_plugin(fsx, dev):
    plugins = {r["name"]: r["inputs"] for r in of_type(fsx, "kubernetes:apps/v1:DaemonSet")}
    efa = plugins["device-plugins-efa"]["spec"]["template"]["spec"]
    assert efa["containers"][0]["image"].endswith("/eks/aws-efa-k8s-device-plugin:v0.5.6")
    assert ".dkr.ecr.us-east-1." in efa["containers"][0]["image"]
    values = efa["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values == ["p5"]
    assert [r["name"] for r in of_type(dev, "kubernetes:apps/v1:DaemonSet")] == ["device-plugins-nvidia"]


def test_bottlerocket_groups_get_no_device_plugin():
    config = copy.deepcopy(DEV)
    config["eksbench:gpu_node_groups"][0]["ami_type"] = "BOTTLEROCKET_x86_64_NVIDIA"
    plan = evaluate_config("dev", config)
    assert not of_type(plan, "kubernetes:apps/v1:DaemonSet")


def test_every_output_is_present(dev):
    expected = {"cluster_name", "region", "kubeconfig", "results_bucket", "results_prefix", "experiment_results",
                "dataset_uri", "storage_kind", "storage_id", "mount_path", "node_groups",
                "estimated_hourly_cost_usd", "hourly_cost_after_autostop_usd"}
    assert set(dev.outputs) == expected
    assert all(v not in (None, "", "<unknown>") for v in dev.outputs.values()), dev.outputs
    assert dev.outputs["kubeconfig"] == "[secret]"
    assert set(dev.outputs["experiment_results"]) == {"resnet50-synthetic", "cifar10-elastic"}
    assert dev.outputs["estimated_hourly_cost_usd"] == pytest.approx(2 * 24.48 + 2 * 0.096 + 0.10 + 0.045, abs=0.01)
    assert dev.outputs["node_groups"] == ["system-20261122", "p3-20261122"]


@pytest.mark.parametrize("stack", ["dev", "p5-fsx"])
def test_every_kubernetes_object_is_schema_valid(stack, dev, fsx):
    plan = {"dev": dev, "p5-fsx": fsx}[stack]
    objects = [r for r in plan.resources if r["type"].startswith("kubernetes:") and "providers" not in r["type"]]
    assert len(objects) >= 15
    errors = [e for r in objects for e in schema_errors(r["inputs"])]
    assert not errors, "\n".join(errors)


def test_every_kubernetes_object_uses_the_cluster_provider(dev):
    for r in dev.resources:
        if r["type"].startswith("kubernetes:") and r["custom_timeouts"] is not None and "providers" not in r["type"]:
            assert "pulumi:providers:kubernetes::cluster-k8s::" in r["provider"], r["name"]


def test_training_jobs_wait_for_staging_storage_and_etcd(dev):
    urns = {r["urn"]: r for r in dev.resources}

    def ancestors(urn):
        while urn in urns:
            yield urns[urn]["name"]
            urn = urns[urn]["parent"]

    def waits(urn):  # what a resource waits for, transitively
        seen, todo = set(), [urn]
        while todo:
            for dep in urns[todo.pop()]["dependencies"]:
                if dep in urns and dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    jobs = [r for r in of_type(dev, "kubernetes:batch/v1:Job") if r["name"].endswith("-job")]
    assert len(jobs) == 2
    for job in jobs:
        # A dependency on a component is recorded as dependencies on its children; the Jobs wait through the code
        # ConfigMap, which waits for what the suite waits for.
        waited = {name for dep in waits(job["urn"]) for name in ancestors(dep)}
        for needed in ("staging-cifar10", "storage-pvc", "etcd-deployment", "trainer-association"):
            assert needed in waited, f"{job['name']} does not wait for {needed}"
    staging = [r for r in of_type(dev, "kubernetes:batch/v1:Job") if r["name"].startswith("staging-")]
    assert staging and all(urns[s["parent"]]["name"] == "staging" for s in staging)


def test_unoffered_gpu_type_fails_before_anything_is_registered():
    monitor = RecordingMonitor(EksbenchMocks())
    mocks = EksbenchMocks(offered={"p3.16xlarge": (), "g5.48xlarge": ()})
    monitor.mocks = mocks
    with pytest.raises(ConfigError) as e:
        evaluate("dev", mocks=mocks, monitor=monitor)
    message = str(e.value)
    assert 'gpu_node_groups[0].instance_type="p3.16xlarge": not offered in us-west-2 (AWS is retiring P3)' in message
    assert "g6.48xlarge" in message and "g5.48xlarge" not in message
    assert monitor.registrations == []


def group_zones(plan, group):
    zones = {r["name"] + "-id": r["inputs"]["availabilityZone"] for r in of_type(plan, "aws:ec2/subnet:Subnet")}
    return sorted(zones[s] for s in one(plan, NODE_GROUP, group)["inputs"]["subnetIds"])


def test_gpu_group_uses_only_zones_that_offer_its_type():
    mocks = EksbenchMocks(offered={"p3.16xlarge": ("b", "c")})
    config = copy.deepcopy(DEV)
    del config["eksbench:network"]["azs"]
    config["eksbench:gpu_node_groups"][0]["multi_zone_reason"] = "capacity is short in any one zone"
    plan = evaluate_config("dev", config, mocks=mocks)
    assert group_zones(plan, "gpu-p3-ng") == ["us-west-2b", "us-west-2c"]
    assert "gpu_node_groups[0] (p3): zones us-west-2b, us-west-2c: capacity is short in any one zone" in plan.warnings
    # Without the reason, the multi-node group sits in the first zone that offers its type.
    del config["eksbench:gpu_node_groups"][0]["multi_zone_reason"]
    assert group_zones(evaluate_config("dev", config, mocks=mocks), "gpu-p3-ng") == ["us-west-2b"]


def test_a_gpu_group_running_multi_node_experiments_sits_in_one_zone(dev):
    """An Auto Scaling group balances its zones, so two nodes in three subnets land in two zones."""
    assert group_zones(dev, "gpu-p3-ng") == ["us-west-2a"]
    note = [w for w in dev.warnings if w.startswith("gpu_node_groups[0] (p3): one zone, us-west-2a")]
    assert note and "resnet50-synthetic, cifar10-elastic run on several nodes" in note[0]
    # The Jobs tell their summaries the zone the program chose.
    job = one(dev, "kubernetes:batch/v1:Job", "experiments-resnet50-synthetic-job")["inputs"]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EKSBENCH_ZONE"] == "us-west-2a"


def test_a_single_node_group_may_span_zones_and_its_pods_read_their_zone_label():
    config = copy.deepcopy(DEV)
    config["eksbench:experiments"] = [{**e, "nodes": 1} for e in config["eksbench:experiments"]]
    plan = evaluate_config("dev", config)
    assert group_zones(plan, "gpu-p3-ng") == ["us-west-2a", "us-west-2b", "us-west-2c"]
    job = one(plan, "kubernetes:batch/v1:Job", "experiments-resnet50-synthetic-job")["inputs"]
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["EKSBENCH_ZONE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['topology.kubernetes.io/zone']"}}


def test_bad_config_registers_nothing():
    config = copy.deepcopy(DEV)
    config["eksbench:storage"] = {"kind": "nfs"}
    monitor = RecordingMonitor(EksbenchMocks())
    with pytest.raises(ConfigError):
        evaluate_config("dev", config, monitor=monitor)
    assert monitor.registrations == []


def test_existing_vpc_creates_no_network_and_uses_its_private_subnets():
    config = copy.deepcopy(DEV)
    private = ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"]
    config["eksbench:network"] = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "private_subnet_ids": private,
                                               "public_subnet_ids": ["subnet-0bbbbbbbbbbbbbbb1"]}}
    plan = evaluate_config("dev", config)
    assert not [r for r in plan.resources if r["type"].startswith("aws:ec2/")
                and r["type"] not in ("aws:ec2/securityGroup:SecurityGroup", "aws:ec2/launchTemplate:LaunchTemplate")]
    assert one(plan, NODE_GROUP, "system-ng")["inputs"]["subnetIds"] == private
    assert one(plan, NODE_GROUP, "gpu-p3-ng")["inputs"]["subnetIds"] == private[:1]  # its runs are multi-node
    assert {t["inputs"]["subnetId"] for t in of_type(plan, "aws:efs/mountTarget:MountTarget")} == set(private)
    assert one(plan, "eks:index:Cluster")["inputs"]["vpcId"] == "vpc-0123456789abcdef0"


def test_nat_per_az_gives_each_private_subnet_its_own_gateway(fsx, dev):
    assert len(of_type(fsx, "aws:ec2/natGateway:NatGateway")) == 3
    assert len(of_type(dev, "aws:ec2/natGateway:NatGateway")) == 1
    routes = [r["inputs"]["routes"][0]["natGatewayId"] for r in of_type(fsx, "aws:ec2/routeTable:RouteTable")
              if "private" in r["name"]]
    assert len(set(routes)) == 3


def test_admin_roles_get_cluster_admin_access_entries():
    config = copy.deepcopy(DEV)
    config["eksbench:cluster"] = {**config["eksbench:cluster"],
                                  "admin_role_arns": ["arn:aws:iam::123456789012:role/MLAdmin"]}
    entries = one(evaluate_config("dev", config), "eks:index:Cluster")["inputs"]["accessEntries"]
    assert entries["admin-0"]["principalArn"] == "arn:aws:iam::123456789012:role/MLAdmin"
    assert entries["admin-0"]["accessPolicies"]["admin"]["policyArn"].endswith("AmazonEKSClusterAdminPolicy")


def test_efs_is_mounted_through_an_access_point_owned_by_the_pods_user(dev):
    from infra.access.pod_security import RUN_AS_USER

    ap = one(dev, "aws:efs/accessPoint:AccessPoint")["inputs"]
    assert ap["posixUser"] == {"uid": RUN_AS_USER, "gid": RUN_AS_USER}
    assert ap["rootDirectory"]["creationInfo"]["ownerUid"] == RUN_AS_USER
    pv = one(dev, "kubernetes:core/v1:PersistentVolume")["inputs"]
    fs_id, _, ap_id = pv["spec"]["csi"]["volumeHandle"].partition("::")
    assert fs_id.startswith("fs-") and ap_id, pv["spec"]["csi"]["volumeHandle"]


def test_the_cluster_runs_the_vpc_cni_network_policy_agent():
    """Without it EKS does not enforce any NetworkPolicy (EKS user guide, "Restrict Pod network traffic")."""
    cluster = next(r for r in evaluate("dev").resources if r["type"] == "eks:index:Cluster")
    assert cluster["inputs"]["vpcCniOptions"]["enableNetworkPolicy"] is True


def test_etcd_has_a_disruption_budget_and_a_priority_above_the_training_pods(dev):
    pdb = one(dev, "kubernetes:policy/v1:PodDisruptionBudget")["inputs"]
    assert pdb["spec"]["maxUnavailable"] == 0 and pdb["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "etcd"}
    priority = one(dev, "kubernetes:scheduling.k8s.io/v1:PriorityClass")["inputs"]
    etcd = one(dev, "kubernetes:apps/v1:Deployment", "etcd-deployment")["inputs"]["spec"]["template"]["spec"]
    assert etcd["priorityClassName"] == priority["metadata"]["name"] and priority["value"] > 0
    assert priority["globalDefault"] is False
    for r, spec in pod_specs(dev):  # training pods keep priority 0, below etcd
        if r["type"] == "kubernetes:batch/v1:Job":
            assert "priorityClassName" not in spec, r["name"]
    note = [w for w in dev.warnings if w.startswith("rdzv_backend of experiments[0], experiments[1]: etcd is one pod")]
    assert note and 'prefer "c10d"' in note[0]  # the plan says what etcd survives and what to use instead


# The offline engine (program.mock_run.run_program) gives up at once: on the program's exception, on the first failed
# registration and on SIGTERM, the registrations still queued never run, and nothing keeps working afterwards.

QUEUED = 300


class Terminated(KeyboardInterrupt):
    """What bench.cli's SIGTERM handler raises."""


def terminate(_signum, _frame):
    raise Terminated


def buckets(n: int = QUEUED) -> None:
    for i in range(n):
        pulumi.CustomResource("aws:s3/bucket:Bucket", f"b{i}", {"bucket": f"b{i}"})


def run_under_mocks(program, monitor: RecordingMonitor) -> RecordingMonitor:
    return run_program(program, project="eksbench", stack="t", config={"aws:region": "us-west-2"}, monitor=monitor)


def settled(monitor: RecordingMonitor) -> int:
    """The registrations once nothing can add more: a thread still working through a queue would."""
    count = len(monitor.registrations)
    time.sleep(0.5)
    assert len(monitor.registrations) == count, "registrations went on after run_program gave up"
    return count


def test_a_program_that_raises_early_runs_none_of_its_queued_registrations():
    def program():
        buckets()
        raise ValueError("the program's own mistake")

    with pytest.raises(ValueError, match="the program's own mistake"):
        run_under_mocks(program, monitor := RecordingMonitor(EksbenchMocks()))
    assert settled(monitor) == 0


class Slow(EksbenchMocks):
    """Each resource takes a millisecond, as a registration with real inputs does (bare ones take a tenth of that,
    and a busy machine's threads then run hundreds before the main thread gets a turn)."""

    def new_resource(self, args):
        time.sleep(0.001)
        return super().new_resource(args)


def test_the_first_failed_registration_is_raised_and_the_ones_queued_after_it_never_run():
    def program():
        pulumi.CustomResource("eks:index:Unknown", "first", {})
        buckets()

    with pytest.raises(NotImplementedError, match="eks:index:Unknown"):
        run_under_mocks(program, monitor := RecordingMonitor(Slow()))
    assert settled(monitor) < QUEUED // 4


def test_registrations_given_up_leave_no_unretrieved_exception_to_report(caplog):
    """The registrations refused after a failure end in GaveUp, which nobody awaits once the plan has given up. Each
    such future reported "Future exception was never retrieved" with its traceback when collected: noise on a
    plan's stderr, and formatting that traceback in a collection that fell inside ``ast.parse`` made Python 3.11 raise
    "AST constructor recursion depth mismatch" in whatever code was parsing (the traceback module parses source to
    place its carets)."""
    import gc

    def program():
        pulumi.CustomResource("eks:index:Unknown", "first", {})
        buckets()

    for _ in range(6):  # a later plan lets go of an earlier one's futures
        with pytest.raises(NotImplementedError):
            run_under_mocks(program, monitor := RecordingMonitor(Slow()))
        settled(monitor)
    run_under_mocks(buckets, RecordingMonitor(EksbenchMocks()))
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def signal_case(case: str) -> dict:
    """Runs in a child process (``in_child``): under a SIGTERM handler that raises, as bench.cli's does, the signal
    comes while the program builds (``build``) or while its registrations run (``registrations``). An exception a
    signal handler raises can land inside C code, and CPython 3.11 then miscounts its recursion depth for good
    ("AST constructor recursion depth mismatch" later in the same process): the test runner is kept out of it."""
    signal.signal(signal.SIGTERM, terminate)
    monitor = RecordingMonitor(SignalAt(20) if case == "registrations" else EksbenchMocks())

    def build():
        buckets()
        os.kill(os.getpid(), signal.SIGTERM)
        buckets(1)

    started, raised = time.perf_counter(), None
    try:
        run_under_mocks(build if case == "build" else buckets, monitor)
    except Terminated:
        raised = "Terminated"
    took, count = time.perf_counter() - started, len(monitor.registrations)
    time.sleep(0.5)
    return {"raised": raised, "seconds": took, "registered": count, "later": len(monitor.registrations)}


def in_child(case: str) -> dict:
    code = f"import json; from tests.program.test_program import signal_case; print(json.dumps(signal_case({case!r})))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                                         os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sigterm_while_the_program_builds_stops_it_with_nothing_registered():
    got = in_child("build")
    assert (got["raised"], got["registered"], got["later"]) == ("Terminated", 0, 0), got


class SignalAt(Slow):
    """Sends SIGTERM to this process's main thread (where another process's SIGTERM lands and Python runs handlers)
    at its ``at``-th resource, from the engine's worker thread."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.seen, self.lock = at, 0, threading.Lock()  # several worker threads count: exactly one signal

    def new_resource(self, args):
        with self.lock:
            self.seen += 1
            send = self.seen == self.at
        if send:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        return super().new_resource(args)


def test_sigterm_while_registrations_run_stops_them_at_once():
    got = in_child("registrations")
    assert got["raised"] == "Terminated" and got["seconds"] < 30, got
    assert got["registered"] == got["later"] < QUEUED // 2, got  # and nothing went on after run_program gave up


def test_sigterm_to_plan_on_a_stack_at_the_limits_exits_promptly(tmp_path):
    """128 experiments plan in about 10 s on 2 cores (25 s before registration was linear), the program building its
    resources from about 1.5 to 4 s; SIGTERM during the plan ends it in seconds, with exit 143, whether the program is
    still building (as here: the plan used to wait for good) or its registrations are running."""
    config = read_stack_yaml("dev")
    first = config["eksbench:experiments"][0]
    config["eksbench:experiments"] = [{**first, "name": f"e{i}"} for i in range(128)]
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.big.yaml").write_text(yaml.safe_dump({"config": config}))
    plan = subprocess.Popen([sys.executable, "-m", "bench", "plan", "big", "--project-dir", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    plan.send_signal(signal.SIGTERM)
    signalled = time.perf_counter()
    try:
        _, err = plan.communicate(timeout=30)
    finally:
        plan.kill()
    assert plan.returncode == 143 and err.strip() == "terminated", err[-2000:]
    assert time.perf_counter() - signalled < 15


def test_plans_leave_no_event_loop_for_the_garbage_collector_to_find_unclosed():
    """Each plan's loops (its own, its threads', the one it leaves the thread) are closed or reused: left open, the
    collector later said "unclosed event loop" (a ResourceWarning) wherever it ran, in the middle of another command."""
    import gc
    import warnings

    evaluate("dev")
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(2):
            evaluate("dev")
        gc.collect()
    unclosed = [str(w.message) for w in caught if "unclosed event loop" in str(w.message)]
    assert unclosed == []
