"""What `pulumi up` on a real account needs and the mock engine used to let through.

Each test here failed on the code before the "Ready for a real AWS account" fixes (checked by
reverting the fix): storage admitted pulumi-eks' own security group instead of the one the nodes
carry; node groups had fixed names; pods could reach IMDS (hop limit 2); and so on.
"""

import base64
import copy
import inspect

import pulumi_aws as aws
import pytest

from infra.cluster.node_group import NODE_GROUP_REPLACE_INPUTS
from program.mocks import (
    EKS_CLUSTER_OUTPUTS,
    EKS_CREATED_CLUSTER_SG,
    PULUMI_EKS_CLUSTER_SG,
    PULUMI_EKS_NODE_SG,
    EksbenchMocks,
    RecordingMonitor,
)
from program.offline import evaluate_config
from tests.program.test_program import DEV, NODE_GROUP, P5_FILLED

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def recorded(stack_config, stack="dev", mocks=None):
    monitor = RecordingMonitor(mocks or EksbenchMocks(region=stack_config["aws:region"]))
    plan = evaluate_config(stack, stack_config, mocks=monitor.mocks, monitor=monitor)
    return plan, monitor.registrations


@pytest.fixture(scope="module")
def dev():
    return recorded(DEV)


@pytest.fixture(scope="module")
def fsx():
    return recorded(P5_FILLED, "p5-fsx")


def of_type(regs, typ):
    return [r for r in regs if r.type == typ]


def one(regs, typ, name=None):
    found = [r for r in of_type(regs, typ) if name is None or r.name == name]
    assert len(found) == 1, [r.name for r in found]
    return found[0]


# --- 2. the security group the nodes carry reaches storage ----------------------------------------

def allowed(rules, *, group, peer, port):
    return any(r.inputs["securityGroupId"] == group and r.inputs.get("referencedSecurityGroupId") == peer and
               (r.inputs.get("ipProtocol") == "-1" or r.inputs["fromPort"] <= port <= r.inputs["toPort"])
               for r in rules)


def test_efs_admits_the_group_the_nodes_carry_on_nfs(dev):
    _, regs = dev
    storage = one(regs, "aws:ec2/securityGroup:SecurityGroup", "storage-sg").name + "-id"
    ingress = of_type(regs, INGRESS)
    assert allowed(ingress, group=storage, peer=EKS_CREATED_CLUSTER_SG, port=2049)
    # The EKS-created cluster group allows all outbound traffic by default (EKS user guide, "View
    # Amazon EKS security group requirements for clusters"), so no egress rule is needed on it.
    assert not allowed(ingress, group=storage, peer=PULUMI_EKS_CLUSTER_SG, port=2049)


@pytest.mark.parametrize("port", [988, 1018, 1021, 1023])
def test_lustre_admits_the_group_the_nodes_carry_both_ways(fsx, port):
    _, regs = fsx
    storage = one(regs, "aws:ec2/securityGroup:SecurityGroup", "storage-sg").name + "-id"
    ingress, egress = of_type(regs, INGRESS), of_type(regs, EGRESS)
    nodes = EKS_CREATED_CLUSTER_SG
    assert allowed(ingress, group=storage, peer=nodes, port=port)  # clients -> servers
    assert allowed(egress, group=storage, peer=nodes, port=port)  # servers -> clients
    assert allowed(ingress, group=nodes, peer=storage, port=port)  # the nodes accept the servers
    assert allowed(ingress, group=storage, peer=storage, port=port)  # server to server
    assert allowed(egress, group=storage, peer=storage, port=port)
    for r in ingress + egress:
        assert r.inputs.get("referencedSecurityGroupId") not in (PULUMI_EKS_CLUSTER_SG, PULUMI_EKS_NODE_SG), r.name


# --- mocks shaped like the real providers -----------------------------------------------------

def test_mock_cluster_returns_every_pulumi_eks_output_and_distinct_groups():
    rid, state = EksbenchMocks().new_resource(type("A", (), {
        "name": "c", "typ": "eks:index:Cluster", "inputs": {"name": "c"}, "provider": "", "id": None,
        "custom": False})())
    assert set(state) == set(EKS_CLUSTER_OUTPUTS)
    assert len({PULUMI_EKS_CLUSTER_SG, PULUMI_EKS_NODE_SG, EKS_CREATED_CLUSTER_SG}) == 3


def test_mock_refuses_what_it_does_not_know():
    mocks = EksbenchMocks()
    with pytest.raises(NotImplementedError, match="aws:ec2/getAmi:getAmi"):
        mocks.call(type("C", (), {"token": "aws:ec2/getAmi:getAmi", "args": {}, "provider": ""})())
    with pytest.raises(NotImplementedError, match="eks:index:NodeGroupV2"):
        mocks.new_resource(type("A", (), {"name": "n", "typ": "eks:index:NodeGroupV2", "inputs": {},
                                          "provider": "", "id": None, "custom": False})())


def test_get_cluster_answer_has_exactly_the_sdk_fields(dev):
    mocks = EksbenchMocks()
    mocks.clusters["c"] = {"version": "1.35"}
    answer = mocks.call(type("C", (), {"token": "aws:eks/getCluster:getCluster", "args": {"name": "c"},
                                       "provider": ""})())
    fields = [p for p in inspect.signature(aws.eks.GetClusterResult.__init__).parameters if p != "__self__"]
    assert len(answer) == len(fields)
    assert answer["vpcConfig"]["clusterSecurityGroupId"] == EKS_CREATED_CLUSTER_SG


# --- 6. replacement safety --------------------------------------------------------------------

def test_no_node_group_has_a_fixed_name(dev, fsx):
    """NODE_GROUP_REPLACE_INPUTS (ForceNew in terraform-provider-aws internal/service/eks/node_group.go)
    change by replacement, created before the old group is deleted: a fixed name would collide."""
    assert "instanceTypes" in NODE_GROUP_REPLACE_INPUTS and "subnetIds" in NODE_GROUP_REPLACE_INPUTS
    for _, regs in (dev, fsx):
        groups = of_type(regs, NODE_GROUP)
        assert groups
        for g in groups:
            assert "nodeGroupName" not in g.inputs and g.inputs["nodeGroupNamePrefix"], g.name


def test_resources_with_fixed_names_delete_before_replacing(dev):
    _, regs = dev
    for r in regs:
        if r.type == "aws:cloudwatch/logGroup:LogGroup":
            assert r.inputs["name"] and r.delete_before_replace, r.name


# --- 13. the component's depends_on reaches the node groups' children -------------------------

def test_node_groups_wait_for_the_network(dev):
    _, regs = dev
    network_urns = {r.urn for r in regs if r.type.startswith("aws:ec2/") and r.name.startswith("network-")}
    for r in of_type(regs, NODE_GROUP) + of_type(regs, LAUNCH_TEMPLATE):
        assert network_urns & set(r.dependencies), f"{r.name} does not wait for the network"


def test_cluster_has_no_instance_roles_and_a_log_group_with_retention_first(dev):
    _, regs = dev
    cluster = one(regs, "eks:index:Cluster")
    assert "instanceRoles" not in cluster.inputs and "instanceRole" not in cluster.inputs
    logs = one(regs, "aws:cloudwatch/logGroup:LogGroup")
    assert logs.inputs["name"] == "/aws/eks/eksbench-dev/cluster" and logs.inputs["retentionInDays"] > 0
    assert logs.urn in cluster.dependencies and not logs.retain_on_delete


# --- security defaults: IMDS ------------------------------------------------------------------

def test_every_node_group_uses_a_launch_template_with_imdsv2_hop_limit_1(dev, fsx):
    for _, regs in (dev, fsx):
        templates = {r.name + "": r for r in of_type(regs, LAUNCH_TEMPLATE)}
        for g in of_type(regs, NODE_GROUP):
            assert g.inputs["launchTemplate"]["id"].startswith("lt-"), g.name
        for t in templates.values():
            assert t.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                                   "httpPutResponseHopLimit": 1}, t.name


def test_public_endpoint_private_only_with_empty_cidrs():
    config = copy.deepcopy(DEV)
    config["eksbench:cluster"] = {**config["eksbench:cluster"], "public_access_cidrs": []}
    plan, regs = recorded(config)
    cluster = one(regs, "eks:index:Cluster").inputs
    assert cluster["endpointPublicAccess"] is False and "publicAccessCidrs" not in cluster
    assert any("private endpoint only" in w for w in plan.warnings)


# --- 11. Lustre client on AL2023 nodes that mount FSx -----------------------------------------

def test_fsx_nodes_install_the_lustre_client_and_efs_nodes_do_not(dev, fsx):
    for t in of_type(fsx[1], LAUNCH_TEMPLATE):
        doc = base64.b64decode(t.inputs["userData"]).decode()
        assert doc.startswith("MIME-Version: 1.0\nContent-Type: multipart/mixed")
        assert "dnf install -y lustre-client" in doc
    assert not any("userData" in t.inputs for t in of_type(dev[1], LAUNCH_TEMPLATE))


# --- 14. Capacity Blocks ------------------------------------------------------------------------

def test_capacity_block_group_targets_the_reservation_in_its_zone():
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:gpu_node_groups"][0].update(capacity_type="CAPACITY_BLOCK",
                                                 capacity_reservation_id="cr-0123456789abcdef0",
                                                 availability_zone="us-east-1b")
    _, regs = recorded(config, "p5-fsx")
    template = one(regs, LAUNCH_TEMPLATE, "gpu-p5-lt").inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    assert template["instanceType"] == "p5.48xlarge" and "placement" not in template
    group = one(regs, NODE_GROUP, "gpu-p5-ng").inputs
    assert group["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in group
    zones = {r.name + "-id": r.inputs["availabilityZone"] for r in of_type(regs, "aws:ec2/subnet:Subnet")}
    assert [zones[s] for s in group["subnetIds"]] == ["us-east-1b"]
    assert not of_type(regs, "aws:ec2/placementGroup:PlacementGroup")


# --- 6. zones: EKS-unsupported zone IDs are skipped; pinned zones are used as given -----------

def test_zones_without_eks_are_skipped_and_pinned_zones_are_kept(fsx, dev):
    plan, regs = fsx
    zones = {r.inputs["availabilityZone"] for r in of_type(regs, "aws:ec2/subnet:Subnet")}
    assert "us-east-1c" not in zones  # the mock's us-east-1c is use1-az3
    assert any(w.startswith("network.azs: not set, so this run chose") for w in plan.warnings)
    zones = sorted({r.inputs["availabilityZone"] for r in of_type(dev[1], "aws:ec2/subnet:Subnet")})
    assert zones == DEV["eksbench:network"]["azs"]


# --- 9 and 12: results bucket lifecycle; no StorageClass --------------------------------------

def test_home_results_bucket_expires_noncurrent_versions():
    home = RecordingMonitor(EksbenchMocks())
    evaluate_config("home", {"aws:region": "us-west-2", "eksbench:role": "home"}, mocks=home.mocks, monitor=home)
    rule = one(home.registrations, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"][0]
    assert rule["status"] == "Enabled" and rule["noncurrentVersionExpiration"]["noncurrentDays"] > 0


def test_no_storage_class_and_the_static_volume_binds_without_one(dev, fsx):
    for _, regs in (dev, fsx):
        assert not of_type(regs, "kubernetes:storage.k8s.io/v1:StorageClass")
        pv = one(regs, "kubernetes:core/v1:PersistentVolume").inputs["spec"]
        pvc = one(regs, "kubernetes:core/v1:PersistentVolumeClaim").inputs["spec"]
        assert pv["storageClassName"] == pvc["storageClassName"] == ""


@pytest.mark.parametrize("key, value", [
    ("eksbench:storage", {"kind": "efs", "efs": {"performance_mode": "maxIO"}}),
    ("eksbench:cluster", {"public_access_cidrs": ["203.0.113.0/24"]}),
    ("eksbench:results", None),
])
def test_new_rules_fail_before_anything_is_registered(key, value):
    from core.config.fields import ConfigError

    config = copy.deepcopy(DEV)
    if value is None:
        del config[key]
    else:
        config[key] = value
    monitor = RecordingMonitor(EksbenchMocks())
    with pytest.raises(ConfigError):
        evaluate_config("dev", config, mocks=monitor.mocks, monitor=monitor)
    assert monitor.registrations == []


# --- A GPU group that opts in to Cluster Autoscaler: its size, labels and ASG tags ---------------------

ASG_TAG = "aws:autoscaling/tag:Tag"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


@pytest.fixture(scope="module")
def autoscaled():
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:gpu_node_groups"][0]["autoscale"] = True
    return recorded(config, "p5-fsx")[1]


def gpu_group(regs):
    [ng] = [r for r in of_type(regs, NODE_GROUP) if not r.inputs["nodeGroupNamePrefix"].startswith("system")]
    return ng


def test_the_group_scales_from_zero_and_pulumi_leaves_its_desired_size_alone(autoscaled):
    """It was created at desired_size = max_size: every p5 booted and billed before any Job asked for one."""
    ng = gpu_group(autoscaled)
    assert ng.inputs["scalingConfig"]["minSize"] == 0 and ng.inputs["scalingConfig"]["desiredSize"] == 0
    assert ng.ignore_changes == ["scalingConfig.desiredSize"]
    assert ng.inputs["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-h100"


def test_its_auto_scaling_group_carries_the_efa_node_template_tags(autoscaled):
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"] for r in of_type(autoscaled, ASG_TAG)}
    assert {f"{TEMPLATE}/resources/vpc.amazonaws.com/efa", f"{TEMPLATE}/resources/hugepages-2Mi"} <= set(tags)
    assert all(t["propagateAtLaunch"] is False for t in tags.values())
    asgs = {r.inputs["autoscalingGroupName"] for r in of_type(autoscaled, ASG_TAG)}
    assert len(asgs) == 1 and asgs.pop().startswith("eks-")


def test_the_group_does_not_wait_for_autostops_generation(autoscaled):
    owner = [r.urn for r in autoscaled if r.name == "autostop-owner"]
    ng = gpu_group(autoscaled)
    component = next(r for r in autoscaled if r.urn == ng.parent)
    assert owner and not set(owner) & set(component.dependencies)


def test_a_group_that_does_not_opt_in_is_unchanged():
    regs = recorded(P5_FILLED, "p5-fsx")[1]
    ng = gpu_group(regs)
    assert not of_type(regs, ASG_TAG) and not ng.ignore_changes
    assert "k8s.amazonaws.com/accelerator" not in ng.inputs["labels"]


RELEASE = "kubernetes:helm.sh/v3:Release"


def test_cluster_autoscaler_is_installed_from_the_chart_pinned_for_the_clusters_minor(autoscaled):
    from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS

    [release] = of_type(autoscaled, RELEASE)
    version = next(r for r in autoscaled if r.type == "eks:index:Cluster").inputs["version"]
    chart, app = CLUSTER_AUTOSCALER_CHARTS[version]
    assert (release.inputs["chart"], release.inputs["version"], release.inputs["namespace"]) == (
        "cluster-autoscaler", chart, "kube-system")
    assert release.inputs["repositoryOpts"]["repo"] == "https://kubernetes.github.io/autoscaler"
    values = release.inputs["values"]
    assert values["autoDiscovery"]["clusterName"] and values["cloudProvider"] == "aws"
    assert values["image"]["tag"] == f"v{app}" and values["nodeSelector"] == {"eksbench.io/pool": "system"}
    # An idle node goes after 3 minutes, not the autoscaler's 10 (and 10 more after any scale-up).
    assert values["extraArgs"] == {"scale-down-unneeded-time": "3m0s", "scale-down-delay-after-add": "3m0s"}
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in of_type(autoscaled, ASG_TAG)}
    assert tags[f"{TEMPLATE}/autoscaling-options/scaledownunneededtime"] == "3m0s"
    assert not of_type(recorded(P5_FILLED, "p5-fsx")[1], RELEASE)  # nobody opted in: no autoscaler


def test_its_role_scales_only_the_auto_scaling_groups_tagged_for_this_cluster(autoscaled):
    import json

    [grant] = [r for r in of_type(autoscaled, "aws:iam/rolePolicy:RolePolicy") if r.name == "autoscaler-identity-scale"]
    doc = json.loads(grant.inputs["policy"])
    [write] = [s for s in doc["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert write["Action"] == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    [(key, value)] = write["Condition"]["StringEquals"].items()
    assert key.startswith("aws:ResourceTag/eksbench.io/cluster-autoscaler/") and value == "owned"
    [assoc] = [r for r in of_type(autoscaled, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
               if r.name == "autoscaler-identity-association"]
    assert (assoc.inputs["namespace"], assoc.inputs["serviceAccount"]) == ("kube-system", "cluster-autoscaler")


# --- node group updates: what EKS does when a launch template changes --------------------------------

def test_the_system_group_forces_its_update_past_etcds_budget_and_gpu_groups_roll_without_surging(dev, fsx):
    """etcd's PodDisruptionBudget allows no eviction: an unforced update of the system group failed with
    PodEvictionFailure after 15 minutes. GPU groups surged extra p4d/p5 nodes (EKS's default strategy)."""
    for _, regs in (dev, fsx):
        groups = of_type(regs, NODE_GROUP)
        system = one(regs, NODE_GROUP, "system-ng")
        assert system.inputs.get("forceUpdateVersion") is True and "updateConfig" not in system.inputs
        gpu = [g for g in groups if g is not system]
        assert gpu and all(g.inputs["updateConfig"] == {"updateStrategy": "MINIMAL", "maxUnavailablePercentage": 100}
                           and "forceUpdateVersion" not in g.inputs for g in gpu)
    assert "Valid values: `MINIMAL` and `DEFAULT`" in inspect.getsource(aws.eks.NodeGroupUpdateConfigArgs)


def test_the_autoscaler_discovers_and_scales_only_the_group_that_opted_in():
    """EKS tags every managed node group's Auto Scaling group k8s.io/cluster-autoscaler/enabled and
    .../<cluster>, which the chart's default autoDiscovery.tags match: the autoscaler took the fixed GPU group too
    (min_size 0), shrinking it between experiments, and with no EFA node-template tags on it, left its pods Pending."""
    import json

    config = copy.deepcopy(P5_FILLED)
    fixed = copy.deepcopy(config["eksbench:gpu_node_groups"][0])
    config["eksbench:gpu_node_groups"][0]["autoscale"] = True
    config["eksbench:gpu_node_groups"].append({**fixed, "name": "fixed"})
    regs = recorded(config, "p5-fsx")[1]
    discovery = {r.inputs["tag"]["key"]: r for r in of_type(regs, ASG_TAG)
                 if r.inputs["tag"]["key"].startswith("eksbench.io/cluster-autoscaler/")}
    [(key, tag)] = discovery.items()
    assert tag.inputs["tag"]["value"] == "owned" and tag.name.startswith("gpu-p5")
    assert not any(r.name.startswith("gpu-fixed") for r in of_type(regs, ASG_TAG))
    [release] = of_type(regs, RELEASE)
    assert release.inputs["values"]["autoDiscovery"]["tags"] == [key]
    [grant] = [r for r in of_type(regs, "aws:iam/rolePolicy:RolePolicy") if r.name == "autoscaler-identity-scale"]
    [write] = [s for s in json.loads(grant.inputs["policy"])["Statement"] if s["Sid"] == "ScaleThisClustersGroups"]
    assert write["Condition"]["StringEquals"] == {f"aws:ResourceTag/{key}": "owned"}
    assert key == f"eksbench.io/cluster-autoscaler/{release.inputs['values']['autoDiscovery']['clusterName']}"


def test_the_plan_says_an_autoscaled_groups_boot_and_pull_fall_inside_the_jobs_deadline():
    config = copy.deepcopy(P5_FILLED)
    config["eksbench:gpu_node_groups"][0]["autoscale"] = True
    [note] = [w for w in evaluate_config("p5-fsx", config).warnings if w.startswith("gpu_node_groups[0].autoscale")]
    assert "starts at 0 nodes" in note and "boot and join (about 4 min), the Lustre client's install" in note
    assert "the image's pull (about" in note and "experiments[0].timeout_minutes=120" in note
    assert not [w for w in evaluate_config("p5-fsx", P5_FILLED).warnings if "starts at 0 nodes" in w]


def test_the_plan_names_who_reads_fsx_from_another_zone():
    """FSx sits in the first GPU group's first zone; a second group in another zone, and the system nodes spread
    over the network's zones, read it across zones without a word."""
    config = copy.deepcopy(P5_FILLED)
    second = {**copy.deepcopy(config["eksbench:gpu_node_groups"][0]), "name": "second", "availability_zone": "us-east-1b"}
    config["eksbench:gpu_node_groups"].append(second)
    notes = [w for w in evaluate_config("p5-fsx", config).warnings if "across zones" in w]
    assert notes[0] == ("gpu_node_groups[1] (second): its nodes in us-east-1b read FSx for Lustre in us-east-1a across "
                        "zones (billed per GB each way, and slower); set its availability_zone to us-east-1a to keep "
                        "its reads in one zone")
    assert len(notes) == 2 and notes[1].startswith("system nodes: spread over us-east-1a, us-east-1b, us-east-1d")
    assert not [w for w in evaluate_config("dev", DEV).warnings if "across zones" in w]  # EFS: a target per zone
