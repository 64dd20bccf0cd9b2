"""Runs the Pulumi program under Pulumi's mock engine and records what it would create.

``RecordingMonitor`` sees every RegisterResource request (type, name, parent, provider,
dependencies, inputs, retain-on-delete, custom timeouts) and the stack's outputs, which
is everything the offline plan and the mock-engine tests need. ``EksbenchMocks``
answers the outputs and invokes the program reads, the way AWS would shape them.

Two Pulumi quirks shape this module (pulumi/pulumi's mocks.py and multi-language component docs):
- remote components (``eks.Cluster``, ``eks.ManagedNodeGroup``) register once with no
  children, so their outputs must be returned here;
- resource references passed into remote components make mock runs flaky, so the
  monitor does not advertise RESOURCE_REFERENCES.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import mocks as pmocks
from pulumi.runtime.proto import resource_pb2

from core.catalog import aws as catalog
from core.catalog.aws import DEFAULT_REGION

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


def _plain(value: Any) -> Any:
    """Inputs as JSON-friendly values (unknowns and secrets become markers)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


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

    def _answer(self, answer, request):  # noqa: ANN001 - a MockMonitor method and its request
        """``answer(request)``, recording its failure; GaveUp at once once one has failed or a signal stopped."""
        if self.failure is not None or self.stopped:
            why = f"an earlier registration failed ({type(self.failure).__name__})" if self.failure else "stopped"
            raise GaveUp(f"not registered: {why}")
        try:
            return answer(request)
        except Exception as e:
            if self.failure is None:
                self.failure = e
            raise

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

    def _register(self, request):
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        from pulumi.runtime import rpc
        from pulumi.runtime.mocks import _ensure_event_loop
        _ensure_event_loop()
        timeouts = request.customTimeouts
        self.registrations.append(Registration(
            urn=response.urn, type=request.type, name=request.name, parent=request.parent,
            provider=request.provider, dependencies=sorted(set(request.dependencies)),
            inputs=_plain(rpc.deserialize_properties(request.object)), custom=bool(request.custom),
            retain_on_delete=bool(request.retainOnDelete),
            custom_timeouts={k: v for k, v in (("create", timeouts.create), ("update", timeouts.update),
                                               ("delete", timeouts.delete)) if v},
            ignore_changes=list(request.ignoreChanges), replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace), protect=bool(request.protect)))
        return response

    def _read(self, request):
        response = super().ReadResource(request)
        from pulumi.runtime import rpc
        self.registrations.append(Registration(
            urn=response.urn, type=request.type, name=request.name, parent=request.parent,
            provider=request.provider, dependencies=sorted(set(request.dependencies)),
            inputs=_plain(rpc.deserialize_properties(request.properties)), custom=True, retain_on_delete=False,
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

    def new_resource(self, args: pmocks.MockResourceArgs):
        name, typ, inputs = args.name, args.typ, dict(args.inputs)
        rid = f"{name}-id"
        state: dict[str, Any] = dict(inputs)
        arn = f"arn:aws:{typ.split(':')[1].split('/')[0]}:{self.region}:123456789012:{name}"
        if typ == "eks:index:Cluster":
            cluster_name = inputs.get("name", name)
            self.clusters[cluster_name] = inputs
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster_name}]}
            state = {k: None for k in EKS_CLUSTER_OUTPUTS}
            state.update(kubeconfig=kubeconfig, kubeconfigJson=json.dumps(kubeconfig),
                         eksCluster=f"{cluster_name}", core={}, instanceRoles=[],
                         clusterSecurityGroup=PULUMI_EKS_CLUSTER_SG, nodeSecurityGroup=PULUMI_EKS_NODE_SG,
                         clusterSecurityGroupId=PULUMI_EKS_CLUSTER_SG, nodeSecurityGroupId=PULUMI_EKS_NODE_SG,
                         clusterIngressRuleId="sgr-0000000000000001", defaultNodeGroupAsgName="",
                         fargateProfileId="", fargateProfileStatus="", oidcProviderArn="",
                         oidcProviderUrl=f"https://oidc.eks.{self.region}.amazonaws.com/id/EXAMPLE",
                         oidcIssuer=f"oidc.eks.{self.region}.amazonaws.com/id/EXAMPLE", autoModeNodeRoleName="")
        elif typ == "eks:index:ManagedNodeGroup":
            state = {"nodeGroup": f"{name}-nodegroup-id", "placementGroupName": ""}
        elif typ.startswith("eks:"):
            raise NotImplementedError(f"EksbenchMocks does not know the outputs of {typ} ({name}); add them from "
                                      "the pulumi-eks source before using it")
        elif typ == "pulumi:pulumi:StackReference":
            # The engine's answer to a StackReference read (pulumi/stack_reference.py: name, outputs,
            # secretOutputNames); its id is the referenced stack's name.
            ref = args.resource_id or inputs.get("name") or name
            if ref in self.stacks and self.stacks[ref] is None:
                raise KeyError(f"unknown stack {ref!r}")
            outputs = self.stacks[ref] if ref in self.stacks else home_stack_outputs(ref, self.region)
            return ref, {"name": ref, "outputs": outputs, "secretOutputNames": []}
        elif typ == "aws:ecr/repository:Repository":
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


async def _resolve(value: Any) -> Any:
    output = pulumi.Output.from_input(value)
    if not await output.is_known():
        return "<unknown>"
    if await output.is_secret():
        return "[secret]"
    return await output.future()


# How often the wait for outstanding registrations looks for a failed one or a signal (program.mocks._drain).
POLL_S = 0.05


class _Signals:
    """SIGINT and SIGTERM while the program runs under the mocks, for handlers that raise (``bench.cli`` turns
    SIGTERM into an exception). The handler runs at once, as before, and while the loop runs the signal is also
    recorded: an exception raised there can land in a weakref callback, which Python reports as "Exception ignored"
    and drops (the plan then went on to the end), so ``_drain`` hands a recorded signal to the handler again at its
    next look. A handler that raises stops the monitor at once, so the worker threads refuse what is queued even
    before the exception is out. Nothing changes for a signal without a Python handler, or off the main thread (no
    handler runs there)."""

    def __init__(self, monitor: RecordingMonitor) -> None:
        self.monitor = monitor
        self.handlers: dict[int, Any] = {}
        self.pending: int | None = None
        self.in_loop = False

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(signum)
                if callable(handler):
                    self.handlers[signum] = handler
                    signal.signal(signum, self._record)
        return self

    def __exit__(self, *_exc: Any) -> None:
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)

    def _record(self, signum: int, frame: Any) -> None:
        recorded = self.in_loop and self.pending is None
        if recorded:
            self.pending = signum
        try:
            self.handlers[signum](signum, frame)
        except BaseException:
            self.monitor.stopped = True  # an attribute, safe in a handler (a lock the main thread holds is not)
            raise
        if recorded:
            self.pending = None  # the handler lets the plan go on

    def deliver(self) -> None:
        """The recorded signal to its handler (which raises), once."""
        signum, self.pending = self.pending, None
        if signum is not None:
            self.handlers[signum](signum, None)


async def _drain(monitor: RecordingMonitor, signals: _Signals) -> None:
    """Pulumi's own wait for every outstanding RPC (pulumi/runtime/stack.py ``wait_for_rpcs``), given up at the first
    one that fails or at a signal. Pulumi's wait awaits the RPCs last first and raises a failure only once it reaches
    it, so an early failure let every later registration run first. The first failure is ``monitor.failure``
    (the others give up after it), else the RPC manager's record of it (pulumi/runtime/rpc_manager.py
    ``unhandled_exception``, set as soon as it happens)."""
    from pulumi.runtime import stack as runtime_stack
    from pulumi.runtime.settings import _get_rpc_manager

    manager = _get_rpc_manager()
    waiting = asyncio.ensure_future(runtime_stack.wait_for_rpcs())
    try:
        while not waiting.done():
            signals.deliver()
            if monitor.failure is not None:
                raise monitor.failure
            if manager.unhandled_exception is not None:
                raise manager.unhandled_exception.with_traceback(manager.exception_traceback)
            await asyncio.wait({waiting}, timeout=POLL_S)
    finally:
        waiting.cancel()
    if monitor.failure is not None:  # Pulumi's wait may have reached a registration that gave up after it first
        raise monitor.failure
    waiting.result()


def _abandon(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor, rounds: int = 10) -> None:
    """Give up on everything the program queued, at once: registrations waiting for a thread are cancelled, never
    run (a thread pool otherwise runs its whole queue, even at the interpreter's exit), and so is every task on the
    loop; the ones a thread is running (one registration each, milliseconds) are waited for, so nothing works on
    after this. A cancelled task may wake others: a few rounds."""
    executor.shutdown(wait=False, cancel_futures=True)
    for _ in range(rounds):
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    executor.shutdown(wait=True)


def run_program(program, *, project: str, stack: str, config: dict[str, str],
                mocks: EksbenchMocks | None = None, logger=None,
                monitor: RecordingMonitor | None = None) -> RecordingMonitor:
    """Run ``program()`` inside a Stack under the mock engine; return the recording monitor.

    Raises whatever the program raises (ConfigError for bad input), or the first registration that fails, at
    once: nothing queued after it runs. A signal's handler that raises (SIGTERM under ``bench.cli``) stops it so too.
    """
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings  # noqa: F401

    mocks = mocks or EksbenchMocks(region=config.get("aws:region", DEFAULT_REGION))
    monitor = monitor or RecordingMonitor(mocks)
    # The loop must exist before set_mocks: the runtime binds its futures to the current loop. The RPCs run in
    # the loop's default executor (pulumi/runtime/resource.py: run_in_executor(None, ...)): ours, to cancel.
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(thread_name_prefix="eksbench-plan")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    runtime_config.set_all_config(config)
    pmocks.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
    try:
        with _Signals(monitor) as signals:
            # set_mocks already made the root Stack; run the program, let the root register
            # its outputs, then drain every outstanding RPC (that is where program errors surface).
            try:
                program()
                signals.in_loop = True
                loop.run_until_complete(_drain(monitor, signals))
            except BaseException:
                _abandon(loop, executor)
                raise
            # Under mocks the root Stack registered its (empty) outputs before the program ran,
            # so the exports are read from it directly and resolved here.
            root = settings.get_root_resource()
            exports = dict(getattr(root, "outputs", {}) or {})
            monitor.stack_outputs = {k: _plain(loop.run_until_complete(_resolve(v))) for k, v in exports.items()}
            signals.deliver()
    finally:
        settings.reset_options()
        loop.close()
        # Leave the thread a usable loop: later Pulumi code in this process expects one.
        asyncio.set_event_loop(asyncio.new_event_loop())
    return monitor
