"""Pulumi's mock engine as eksbench uses it: what the program would create, recorded, and AWS's answers.

``RecordingMonitor`` sees every RegisterResource request (type, name, parent, provider,
dependencies, inputs, retain-on-delete, custom timeouts) and the stack's outputs, which
is everything the offline plan and the mock-engine tests need. ``EksbenchMocks``
answers the outputs and invokes the program reads, the way AWS would shape them. ``program.mock_run`` runs the
program with them.

Two Pulumi quirks shape this module (pulumi/pulumi's mocks.py and multi-language component docs):
- remote components (``eks.Cluster``, ``eks.ManagedNodeGroup``) register once with no
  children, so their outputs must be returned here;
- resource references passed into remote components make mock runs flaky, so the
  monitor does not advertise RESOURCE_REFERENCES.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2

from core.catalog import aws as catalog
from core.catalog.aws import DEFAULT_REGION
from program.recorded_inputs import plain, read_struct, recorded_inputs, write_struct

DEFAULT_AZS = ("a", "b", "c", "d")


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    provider: str
    dependencies: list[str]
    inputs: dict[str, Any]
    custom: bool
    retain_on_delete: bool
    custom_timeouts: dict[str, str]
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    protect: bool = False
    read: bool = False  # a read resource (StackReference, .get): in the state, never created or deleted

    def as_json(self) -> dict[str, Any]:
        return {"urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
                "provider": self.provider, "dependencies": self.dependencies, "inputs": self.inputs,
                "retain_on_delete": self.retain_on_delete, "protect": self.protect, "read": self.read,
                "custom_timeouts": self.custom_timeouts}


class GaveUp(RuntimeError):
    """A registration refused because an earlier one failed: the plan is being given up."""


class RecordingMonitor(pmocks.MockMonitor):
    def __init__(self, mocks: pmocks.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}
        # The first registration that failed. From then on the worker threads refuse the registrations still
        # queued for them instead of working through them (run_program raises this one); so they do once a signal
        # stopped the plan (``stopped``).
        self.failure: Exception | None = None
        self.stopped = False
        self.busy = 0  # requests a worker thread is answering now (only the workers take _busy_lock)
        self._busy_lock = threading.Lock()

    def _answer(self, answer, request):  # noqa: ANN001 - a MockMonitor method and its request
        """``answer(request)``, recording its failure; GaveUp at once once one has failed or a signal stopped."""
        if self.failure is not None or self.stopped:
            why = f"an earlier registration failed ({type(self.failure).__name__})" if self.failure else "stopped"
            raise GaveUp(f"not registered: {why}")
        with self._busy_lock:
            self.busy += 1
        try:
            return answer(request)
        except Exception as e:
            if self.failure is None:
                self.failure = e
            raise
        finally:
            with self._busy_lock:
                self.busy -= 1

    def GetDeploymentInfo(self, request):
        info = super().GetDeploymentInfo(request)
        keep = [f for f in info.supportedFeatures
                if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES]
        return resource_pb2.DeploymentInfo(supportedFeatures=keep)

    def SupportsFeature(self, request):
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def RegisterResource(self, request):
        return self._answer(self._register, request)

    def ReadResource(self, request):
        return self._answer(self._read, request)

    def _mock_register(self, request):
        """``MockMonitor.RegisterResource`` (pulumi/runtime/mocks.py), its inputs read and its answer written by
        ``program.recorded_inputs`` where they are plain values, read once for the mocks and the record: (the
        answer, the inputs as the record keeps them)."""
        urn = self.make_urn(request.parent, request.type, request.name)
        pmocks._ensure_event_loop()  # noqa: SLF001 - as MockMonitor: reading resource references needs one
        inputs, plain_values = read_struct(request.object)
        args = pmocks.MockResourceArgs(typ=request.type, name=request.name, inputs=inputs,
                                       provider=request.provider, resource_id=request.importId,
                                       custom=request.custom or False,
                                       transforms=pmocks._resolve_callbacks(request.transforms))  # noqa: SLF001
        id_, state = self.mocks.new_resource(args)
        written = write_struct(state)
        obj = written if written is not None else pmocks._sync_await(rpc.serialize_properties(state, {}))  # noqa
        self.resources[urn] = pmocks.MockMonitor.ResourceRegistration(urn, id_, state)
        # The record keeps the very inputs the mocks were given (EksbenchMocks copies before it changes anything).
        recorded = inputs if plain_values else plain(inputs)  # as recorded_inputs gives it, not read again
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj), recorded

    def _register(self, request):
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=self.make_urn(request.parent, request.type, request.name))
        response, inputs = self._mock_register(request)
        timeouts = request.customTimeouts
        self.registrations.append(Registration(
            urn=response.urn, type=request.type, name=request.name, parent=request.parent,
            provider=request.provider, dependencies=sorted(set(request.dependencies)),
            inputs=inputs, custom=bool(request.custom),
            retain_on_delete=bool(request.retainOnDelete),
            custom_timeouts={k: v for k, v in (("create", timeouts.create), ("update", timeouts.update),
                                               ("delete", timeouts.delete)) if v},
            ignore_changes=list(request.ignoreChanges), replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace), protect=bool(request.protect)))
        return response

    def _read(self, request):
        response = super().ReadResource(request)
        self.registrations.append(Registration(
            urn=response.urn, type=request.type, name=request.name, parent=request.parent,
            provider=request.provider, dependencies=sorted(set(request.dependencies)),
            inputs=recorded_inputs(request.properties), custom=True, retain_on_delete=False,
            custom_timeouts={}, read=True))
        return response

    def SignalAndWaitForShutdown(self, request):
        # The real engine answers once every resource is done; the mock has nothing pending.
        from google.protobuf import empty_pb2
        return empty_pb2.Empty()



def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def result_shape(result_type: type, values: dict[str, Any]) -> dict[str, Any]:
    """An invoke answer with exactly the fields of pulumi-aws' result type (its ``__init__`` parameters,
    in wire spelling); a key the type does not have raises, so a mock cannot drift from the SDK."""
    import inspect

    fields = {_camel(n) for n in inspect.signature(result_type.__init__).parameters if n != "__self__"}
    unknown = set(values) - fields
    if unknown:
        raise KeyError(f"{result_type.__name__} has no field(s) {sorted(unknown)}")
    return {f: values.get(f) for f in fields}


def zone_id_prefix(region: str) -> str:
    """us-east-1 -> use1, the way AWS spells zone IDs (use1-az1) for the US regions."""
    parts = region.split("-")
    return parts[0] + "".join(w[0] for w in parts[1:-1]) + parts[-1]


# What pulumi-eks 4 returns from its remote components, read from its source (pulumi/pulumi-eks
# nodejs/eks/cluster/cluster.ts, class Cluster: registerOutputs; nodejs/eks/nodes/nodegroup.ts, class
# ManagedNodeGroup: registerOutputs). Resource-valued outputs arrive as ids here: resource references
# are off under mocks (RecordingMonitor).
EKS_CLUSTER_OUTPUTS = ("clusterSecurityGroup", "core", "defaultNodeGroup", "eksCluster", "eksClusterIngressRule",
                       "instanceRoles", "kubeconfig", "kubeconfigJson", "nodeSecurityGroup",
                       "clusterSecurityGroupId", "nodeSecurityGroupId", "clusterIngressRuleId",
                       "defaultNodeGroupAsgName", "fargateProfileId", "fargateProfileStatus", "oidcProviderArn",
                       "oidcProviderUrl", "oidcIssuer", "autoModeNodeRoleName")
EKS_MANAGED_NODE_GROUP_OUTPUTS = ("nodeGroup", "placementGroupName")
# Distinct ids, as on AWS: pulumi-eks' own groups (created unless skipDefaultSecurityGroups) and the
# group EKS itself creates for the cluster (eksCluster.vpcConfig.clusterSecurityGroupId), which
# managed nodes carry.
PULUMI_EKS_CLUSTER_SG = "sg-0c1a55e700000eks1"
PULUMI_EKS_NODE_SG = "sg-0a0de500000000eks2"
EKS_CREATED_CLUSTER_SG = "sg-0e4500c0ea7ed0eks3"


@dataclass
class EksbenchMocks(pmocks.Mocks):
    """Shapes resource outputs and invokes like AWS and pulumi-eks would; ``offered`` limits instance
    offerings. A remote component type or an invoke this mock does not know raises, naming it, instead
    of resolving to None."""
    region: str = DEFAULT_REGION
    offered: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> AZ suffixes; empty = all
    invokes: list[str] = field(default_factory=list)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the eks:index:Cluster inputs
    # StackReference name -> that stack's outputs; a name not here answers as a home stack would
    # (program.mocks.home_stack_outputs), None answers as a stack that does not exist.
    stacks: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    # Every value these mocks made up (ids, ARNs, generated names, a home stack's outputs), for the plan to label
    # what it prints of them as placeholders (``placeholder_outputs``): AWS gives other values.
    invented: set[str] = field(default_factory=set)

    def new_resource(self, args: pmocks.MockResourceArgs):
        rid, state = self._new_resource(args)
        if args.typ == "pulumi:pulumi:StackReference":  # its made-up outputs are recorded where they are made
            return rid, state
        given = set(_strings(dict(args.inputs)))
        self.invented.update(v for v in _strings([rid, {k: v for k, v in state.items() if k != "name"}])
                             if len(v) >= MIN_INVENTED and v not in given)
        return rid, state

    def _new_resource(self, args: pmocks.MockResourceArgs):
        """The id and state AWS, pulumi-eks or the engine would give a new resource of ``args.typ``."""
        name, typ, inputs = args.name, args.typ, dict(args.inputs)
        if typ.startswith("eks:"):
            return f"{name}-id", self._eks_component(name, typ, inputs)
        if typ == "pulumi:pulumi:StackReference":
            return self._stack_reference(args.resource_id or inputs.get("name") or name)
        return self._resource(name, typ, inputs)

    def _eks_component(self, name: str, typ: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """The outputs of a pulumi-eks remote component (EKS_CLUSTER_OUTPUTS, EKS_MANAGED_NODE_GROUP_OUTPUTS)."""
        if typ == "eks:index:Cluster":
            cluster_name = inputs.get("name", name)
            self.clusters[cluster_name] = inputs
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster_name}]}
            state: dict[str, Any] = {k: None for k in EKS_CLUSTER_OUTPUTS}
            state.update(kubeconfig=kubeconfig, kubeconfigJson=json.dumps(kubeconfig),
                         eksCluster=f"{cluster_name}", core={}, instanceRoles=[],
                         clusterSecurityGroup=PULUMI_EKS_CLUSTER_SG, nodeSecurityGroup=PULUMI_EKS_NODE_SG,
                         clusterSecurityGroupId=PULUMI_EKS_CLUSTER_SG, nodeSecurityGroupId=PULUMI_EKS_NODE_SG,
                         clusterIngressRuleId="sgr-0000000000000001", defaultNodeGroupAsgName="",
                         fargateProfileId="", fargateProfileStatus="", oidcProviderArn="",
                         oidcProviderUrl=f"https://oidc.eks.{self.region}.amazonaws.com/id/EXAMPLE",
                         oidcIssuer=f"oidc.eks.{self.region}.amazonaws.com/id/EXAMPLE", autoModeNodeRoleName="")
            return state
        if typ == "eks:index:ManagedNodeGroup":
            return {"nodeGroup": f"{name}-nodegroup-id", "placementGroupName": ""}
        raise NotImplementedError(f"EksbenchMocks does not know the outputs of {typ} ({name}); add them from "
                                  "the pulumi-eks source before using it")

    def _stack_reference(self, ref: str):
        """The engine's answer to a StackReference read (pulumi/stack_reference.py: name, outputs,
        secretOutputNames); its id is the referenced stack's name."""
        if ref in self.stacks and self.stacks[ref] is None:
            raise KeyError(f"unknown stack {ref!r}")
        if ref in self.stacks:
            return ref, {"name": ref, "outputs": self.stacks[ref], "secretOutputNames": []}
        outputs = home_stack_outputs(ref, self.region)
        self.invented.update(v for k, v in outputs.items() if k != "region")
        return ref, {"name": ref, "outputs": outputs, "secretOutputNames": []}

    def _resource(self, name: str, typ: str, inputs: dict[str, Any]):
        """Any other resource: its inputs, with the ids, ARNs and names AWS would add to its type's state."""
        rid = f"{name}-id"
        state: dict[str, Any] = dict(inputs)
        arn = f"arn:aws:{typ.split(':')[1].split('/')[0]}:{self.region}:123456789012:{name}"
        if typ == "aws:ecr/repository:Repository":
            repo = inputs.get("name") or name
            state.update(arn=f"arn:aws:ecr:{self.region}:123456789012:repository/{repo}", registryId="123456789012",
                         repositoryUrl=f"123456789012.dkr.ecr.{self.region}.amazonaws.com/{repo}")
            rid = repo
        elif typ == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket") or f"{inputs.get('bucketPrefix', name)}{MOCK_BUCKET_SUFFIX}"
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}", id=bucket)
            rid = bucket
        elif typ == "aws:efs/fileSystem:FileSystem":
            rid = "fs-0123456789abcdef0"
            state.update(arn=arn, dnsName=f"{rid}.efs.{self.region}.amazonaws.com")
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            rid = "fs-0fedcba9876543210"
            state.update(arn=arn, dnsName=f"{rid}.fsx.{self.region}.amazonaws.com", mountName="abcdefgh")
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            rid = f"lt-{name}"
            state.update(arn=arn, latestVersion=1, defaultVersion=1, name=inputs.get("name") or f"{name}-lt")
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            group = inputs.get("nodeGroupName") or f"{inputs.get('nodeGroupNamePrefix', '')}20261122"
            # NodeGroupResource: the group's Auto Scaling groups (pulumi_aws/eks/outputs.py, NodeGroupResource)
            state.update(arn=arn, nodeGroupName=group, status="ACTIVE",
                         resources=[{"autoscalingGroups": [{"name": f"eks-{group}-asg"}],
                                     "remoteAccessSecurityGroupId": ""}])
            rid = f"{inputs.get('clusterName')}:{group}"
        elif typ.startswith("aws:"):
            state.setdefault("arn", arn)
            state.setdefault("name", inputs.get("name", name))
        return rid, state

    def call(self, args: pmocks.MockCallArgs):
        import pulumi_aws as aws

        self.invokes.append(args.token)
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{s}" for s in DEFAULT_AZS]
            return result_shape(aws.GetAvailabilityZonesResult, {
                "names": names, "zoneIds": [f"{zone_id_prefix(self.region)}-az{i + 1}" for i in range(len(names))],
                "id": self.region, "state": "available", "groupNames": [self.region] * len(names)})
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            wanted = []
            for f in args.args.get("filters") or []:
                if f.get("name") == "instance-type":
                    wanted.extend(f.get("values") or [])
            wanted = wanted or list(catalog.INSTANCE_TYPES)
            types, locations = [], []
            for t in wanted:
                for suffix in (self.offered.get(t, DEFAULT_AZS) if self.offered else DEFAULT_AZS):
                    types.append(t)
                    locations.append(f"{self.region}{suffix}")
            return result_shape(aws.ec2.GetInstanceTypeOfferingsResult, {
                "instanceTypes": types, "locations": locations, "locationTypes": ["availability-zone"] * len(types),
                "id": self.region, "filters": args.args.get("filters"), "locationType": "availability-zone"})
        if args.token == "aws:eks/getCluster:getCluster":
            name = args.args.get("name")
            if name not in self.clusters:
                raise KeyError(f"getCluster({name!r}): no eks:index:Cluster of that name was registered")
            c = self.clusters[name]
            public = c.get("publicAccessCidrs") or []
            vpc = result_shape(aws.eks.outputs.GetClusterVpcConfigResult, {
                "clusterSecurityGroupId": EKS_CREATED_CLUSTER_SG, "controlPlaneEgressMode": "AWS_MANAGED",
                "endpointPrivateAccess": bool(c.get("endpointPrivateAccess")),
                "endpointPublicAccess": bool(c.get("endpointPublicAccess")),
                "publicAccessCidrs": public, "securityGroupIds": [PULUMI_EKS_CLUSTER_SG],
                "subnetIds": list(c.get("privateSubnetIds") or []) + list(c.get("publicSubnetIds") or []),
                "vpcId": c.get("vpcId")})
            return result_shape(aws.eks.GetClusterResult, {
                "name": name, "id": name, "arn": f"arn:aws:eks:{self.region}:123456789012:cluster/{name}",
                "version": c.get("version"), "status": "ACTIVE", "vpcConfig": vpc, "region": self.region,
                "endpoint": f"https://{name}.eks.{self.region}.amazonaws.com", "tags": c.get("tags") or {}})
        if args.token == "aws:ec2/getInstanceType:getInstanceType":
            t = args.args.get("instanceType")
            spec = catalog.INSTANCE_TYPES.get(t)
            if spec is None:
                raise KeyError(f"getInstanceType({t!r}): not in the instance catalog")
            return result_shape(aws.ec2.GetInstanceTypeResult, {
                "instanceType": t, "id": t, "efaSupported": spec.efa, "defaultVcpus": spec.vcpus,
                "memorySize": spec.memory_gib * 1024, "maximumNetworkCards": spec.network_cards})
        raise NotImplementedError(f"EksbenchMocks does not answer the invoke {args.token}; shape its answer "
                                  "from pulumi-aws' result type (program.mocks.result_shape) before calling it")


MOCK_BUCKET_SUFFIX = "20261122"
# Shorter made-up values ("ACTIVE", "v1") are words a real value may also be, so they are not told as placeholders.
MIN_INVENTED = 8


def _strings(value: Any):
    """Every string in ``value`` (a state or inputs mapping, nested lists and mappings)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def placeholder_outputs(outputs: dict[str, Any], invented: set[str]) -> list[str]:
    """The stack outputs whose value holds a value the mocks made up (a bucket name, an id, an ARN, in a URI too):
    what ``pulumi up`` would export there differs."""
    return [key for key, value in outputs.items()
            if any(made in text for text in _strings(value) for made in invented)]


def home_stack_outputs(reference: str, region: str) -> dict[str, Any]:
    """What ``pulumi up`` of a home stack named ``reference`` (<organization>/<project>/<stack>) would have
    exported under these mocks: the bucket and repository as new_resource names them, through the very
    function program.home exports with (a test runs build_home to check they agree)."""
    from infra.storage.image_repository import repository_name
    from program.home import home_exports

    _, project, stack = reference.split("/", 2) if reference.count("/") >= 2 else ("", "eksbench", reference)
    bucket = f"eksbench-{stack}-"[:37].lower() + MOCK_BUCKET_SUFFIX
    url = f"123456789012.dkr.ecr.{region}.amazonaws.com/{repository_name(project, stack)}"
    return home_exports(bucket, url, project=project, region=region)
