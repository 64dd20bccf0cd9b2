"""The stack's configuration as frozen, typed objects.

``core.config.shape.parse_stack_config`` turns the raw ``eksbench:*`` keys of one stack into a
``StackConfig``, or raises ``ConfigError`` listing every shape problem at once: unknown
keys, wrong types, values out of range or not among the allowed choices (instance types,
Kubernetes versions and AMI types come from ``core.catalog.aws``). Rules that relate two
values, or need the dataset catalog, the region's offerings or the shipped code, are the
second stage, ``program.validation``, which runs only on a config whose shape is clean, so
it never judges a default that stood in for a bad value. Nothing here imports Pulumi or
talks to AWS.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, replace
from typing import Mapping

from core.catalog import aws as catalog
from core.catalog.fabric import FABRIC_MODES
from core.catalog.pins import DEFAULT_EKS_VERSION, TRAINING_IMAGE
from core.contract.results_location import repeat_folder
from core.catalog.llm import MODEL_SIZES
from core.contract.train_args import (
    ACTIVATION_CHECKPOINTS,
    COMPILE_MODES,
    FP8_RECIPES,
    INPUT_PATHS,
    PRECISIONS,
    SHARDINGS,
    WORKLOADS,
)

NAME = r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?"
FRAMEWORKS = ("pytorch", "tensorflow", "horovod", "paddle")
RETIRED_FRAMEWORKS = {"mxnet": "Apache MXNet was retired to the Apache Attic in 2023; use pytorch"}
RDZV_BACKENDS = ("etcd-v2", "c10d")
BATCH_SIZE_MAX = 4096  # per GPU
MAX_REPEATS = 20  # runs of one experiment (repeats): enough for a confidence interval, not a runaway bill
DEFAULT_IMAGE = TRAINING_IMAGE


@dataclass(frozen=True)
class Network:
    vpc_cidr: str = "10.0.0.0/16"
    az_count: int = 3
    nat: str = "single"  # single | per_az
    existing_vpc_id: str | None = None
    existing_public_subnet_ids: tuple[str, ...] = ()
    existing_private_subnet_ids: tuple[str, ...] = ()
    # The zones to span, pinned in the stack file (names such as "us-west-2a"). Empty: chosen from
    # the region's offerings on each run; `bench plan` prints the choice and how to pin it.
    azs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cluster:
    kubernetes_version: str = DEFAULT_EKS_VERSION  # core.catalog.pins says why not always the newest
    # Who may reach the public API endpoint. None: not chosen (the plan rejects it); (): no public
    # endpoint at all (private only; `pulumi up` must then run from inside the VPC).
    public_access_cidrs: tuple[str, ...] | None = None
    admin_role_arns: tuple[str, ...] = ()
    log_types: tuple[str, ...] = ("api", "audit", "authenticator")


@dataclass(frozen=True)
class GpuNodeGroup:
    name: str
    instance_type: str
    ami_type: str = "AL2023_x86_64_NVIDIA"
    desired_size: int = 1
    min_size: int = 0
    max_size: int = 1
    disk_size_gib: int = 200
    capacity_type: str = "ON_DEMAND"  # ON_DEMAND | SPOT | CAPACITY_BLOCK
    capacity_reservation_id: str | None = None  # CAPACITY_BLOCK: the block's reservation id (cr-...)
    efa: bool = False
    placement_group: bool = False
    availability_zone: str | None = None  # pins the group to one zone (EFA, placement group, capacity block)
    subnet_id: str | None = None  # existing VPC: the one private subnet for a single-zone group
    # Why a group that runs multi-node experiments may span zones (e.g. capacity); None: it sits in one
    # (infra.cluster.offerings.one_zone_reason).
    multi_zone_reason: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # Cluster Autoscaler sizes the group (0 up to max_size) by the pods that wait for it (infra/addons/autoscaler.py)
    autoscale: bool = False

    @property
    def gpus_per_node(self) -> int:
        spec = catalog.INSTANCE_TYPES.get(self.instance_type)
        return spec.gpus if spec else 0


@dataclass(frozen=True)
class SystemNodeGroup:
    instance_type: str = "m6i.large"
    desired_size: int = 2
    min_size: int = 1
    max_size: int = 3
    disk_size_gib: int = 50


@dataclass(frozen=True)
class Efs:
    throughput_mode: str = "elastic"  # elastic | bursting
    performance_mode: str = "generalPurpose"  # generalPurpose | maxIO


@dataclass(frozen=True)
class Fsx:
    deployment_type: str = "PERSISTENT_2"  # PERSISTENT_2 (SCRATCH_2 parses, and program.validation rejects it)
    storage_capacity_gib: int = 1200
    per_unit_storage_throughput: int = 250  # MB/s/TiB, PERSISTENT_2 only


@dataclass(frozen=True)
class Storage:
    kind: str = "efs"  # efs | fsx
    mount_path: str = "/data"
    preload: bool = False  # FSx: restore dataset files before training
    efs: Efs = Efs()
    fsx: Fsx = Fsx()


@dataclass(frozen=True)
class Results:
    """Where results (and, unless datasets_uri says otherwise, prepared datasets) live. An experiment
    stack never creates or deletes it: one of the two must be set (program.validation)."""
    home_stack: str | None = None  # the home stack's StackReference name, <organization>/<project>/<stack>
    bucket: str | None = None  # an existing bucket


def choice(default: str, choices: tuple[str, ...]) -> str:
    """A field whose value is one of ``choices``: the shape check and the README's table read them here."""
    return field(default=default, metadata={"choices": choices})


def choices_of(cls: type, name: str) -> tuple[str, ...]:
    return cls.__dataclass_fields__[name].metadata["choices"]


def default_of(cls: type, name: str):
    """A field's default, for the shape check (``core.config.shape``), so no default is written twice."""
    f = cls.__dataclass_fields__[name]
    return f.default_factory() if f.default_factory is not MISSING else f.default


@dataclass(frozen=True)
class Experiment:
    name: str
    workload: str = choice("resnet50", WORKLOADS)
    framework: str = choice("pytorch", FRAMEWORKS)
    min_nodes: int = 1
    max_nodes: int = 1
    gpus_per_node: int = 1
    batch_size: int = 64  # per GPU
    precision: str = choice("amp-fp16", PRECISIONS)
    steps: int = 200
    epochs: int = 0  # when > 0, train by epochs instead of steps
    dataset: str = "synthetic"
    image: str = DEFAULT_IMAGE
    args: tuple[str, ...] = ()
    timeout_minutes: int = 120
    rdzv_backend: str = choice("etcd-v2", RDZV_BACKENDS)
    max_restarts: int = 3
    checkpoint_every: int = 0  # steps; 0 = time-based only (checkpoint_minutes)
    checkpoint_minutes: float = 10.0  # wall-clock minutes between checkpoints (not for synthetic fixed-size runs)
    evaluate: bool = False
    channels_last: bool = True
    compile: bool | None = None  # None: the GPU default decides per experiment (core.config.gpu_defaults)
    compile_mode: str = choice("default", COMPILE_MODES)  # torch.compile mode
    target_accuracy: float | None = None  # report time to this test accuracy (cifar10)
    # ImageFolder data: how JPEGs become batches; "auto": the GPU default decides (core.config.gpu_defaults)
    input_path: str = choice("auto", ("auto", *INPUT_PATHS))
    node_group: str = ""  # the GPU node group it runs on; "" = the first one
    pservers: int = 1  # paddle only
    # On an EFA group: "check" marks a run whose NCCL fell back to sockets degraded; "strict" fails it (core.catalog.fabric)
    fabric: str = choice("check", FABRIC_MODES)
    repeats: int = 1  # runs of the experiment, one after another (Experiment.runs)
    # A language model's keys (llama3; core.catalog.llm, workloads.train.pytorch.llama_parallel): its shape, its
    # tokens per sequence (None: the shape's default, 8192 for 1b, 8b and 70b), tensor parallelism within a node,
    # FSDP2 or HSDP, activation checkpointing (TorchTitan's 8B and 70B recipes: selective and full), the float8
    # recipe with precision fp8, a validation loss every val_every steps and the loss that time to loss counts to.
    model_size: str = choice("8b", MODEL_SIZES)
    seq_len: int | None = None
    tensor_parallel: int = 1
    sharding: str = choice("fsdp", SHARDINGS)
    activation_checkpoint: str = choice("selective", ACTIVATION_CHECKPOINTS)
    fp8_recipe: str = choice("tensorwise", FP8_RECIPES)
    val_every: int = 0
    target_loss: float | None = None
    # Which run this is: 0 for the experiment as configured; 1..repeats for one of its repeats
    # (Experiment.runs sets it; not a stack-file key).
    repeat: int = 0

    @property
    def elastic(self) -> bool:
        return self.min_nodes != self.max_nodes

    def runs(self) -> tuple["Experiment", ...]:
        """What running it means: itself, or each of its repeats (``repeat`` 1..repeats), in order. Repeats
        run one after another, never side by side: they would share the nodes and slow each other."""
        if self.repeats <= 1:
            return (self,)
        return tuple(replace(self, repeat=k) for k in range(1, self.repeats + 1))

    @property
    def results_path(self) -> str:
        """Its folder under the run's results: ``<name>``, or ``<name>/repeat_<k>`` for one repeat."""
        return f"{self.name}/{repeat_folder(self.repeat)}" if self.repeat else self.name

    @property
    def label(self) -> str:
        """How messages name this run: ``<name>``, or ``<name> repeat <k>/<repeats>``."""
        return f"{self.name} repeat {self.repeat}/{self.repeats}" if self.repeat else self.name


@dataclass(frozen=True)
class LocalRun:
    """How ``bench run --local`` scales the stack's experiments down for a CPU machine."""
    nodes: int = 2
    procs_per_node: int = 1
    steps: int = 30
    batch_size: int = 8
    image_size: int = 64
    width_per_group: int = 16
    timeout_minutes: int = 10
    # A language model's shape and sequence length here (0: the shape's default): a CPU trains tiny
    model_size: str = choice("tiny", MODEL_SIZES)
    seq_len: int = 0


@dataclass(frozen=True)
class Autostop:
    """The cluster scales its GPU node groups to zero once the run is over (core/config/autostop.py decides).
    deadline_minutes None: the experiments' budgets plus a margin (core.config.autostop.default_deadline_minutes)."""
    enabled: bool = True
    deadline_minutes: int | None = None
    idle_minutes: int = 5


ROLES = ("experiment", "home")
HOME_ROLE = "home"


@dataclass(frozen=True)
class HomeConfig:
    """A home stack (``eksbench:role: home``): the long-lived bucket for results and datasets, and an
    ECR repository for the training image. No cluster, no experiments."""
    project: str
    stack: str
    region: str
    tags: Mapping[str, str]


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    region: str
    run_id: str
    namespace: str
    network: Network
    cluster: Cluster
    gpu_node_groups: tuple[GpuNodeGroup, ...]
    system_nodes: SystemNodeGroup
    storage: Storage
    results: Results
    datasets_uri: str | None
    experiments: tuple[Experiment, ...]
    execution: str
    local: LocalRun
    tags: Mapping[str, str]
    autostop: Autostop = Autostop()
    # The index in the stack file's experiments list each experiment came from (a sweep makes several
    # of one entry: core.config.sweep); empty: one each, in order.
    experiment_sources: tuple[int, ...] = ()

    def experiment_key(self, i: int) -> str:
        """The stack-file key of ``experiments[i]``, for messages: its entry's index, not its position."""
        return f"experiments[{self.experiment_sources[i] if i < len(self.experiment_sources) else i}]"

    @property
    def node_groups(self) -> dict[str, GpuNodeGroup]:
        return {g.name: g for g in self.gpu_node_groups}

    def node_group_for(self, experiment: Experiment) -> GpuNodeGroup:
        return self.node_groups.get(experiment.node_group) or self.gpu_node_groups[0]

    @property
    def autostop_deadline_minutes(self) -> int:
        """The configured deadline, or the experiments' budgets plus a margin."""
        from core.config.autostop import default_deadline_minutes

        if self.autostop.deadline_minutes is not None:
            return self.autostop.deadline_minutes
        return default_deadline_minutes(self.experiments, self.execution)
