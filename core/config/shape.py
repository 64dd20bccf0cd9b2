"""The first validation stage, shape: a stack's raw config to a ``StackConfig``, or every shape problem.

Shape means keys, types and the ranges or choices of single values. Each problem names
the key path, quotes the value, states the rule and gives an example
(``gpu_node_groups[0].max_size="two": must be a whole number, e.g. 2``); unknown keys are
reported with the allowed ones. Rules that relate values to each other or to the world
(dataset catalog, region offerings, shipped code) are the second stage,
``program.validation``, which runs only once the shape is clean.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from core.catalog import aws as catalog
from core.catalog import compat
from core.catalog.pins import PADDLE_IMAGE, training_image
from core.config import sweep
from core.config.fields import ConfigError, Reader, cidr_rule, show
from core.config.model import (
    BATCH_SIZE_MAX,
    DEFAULT_IMAGE,
    HOME_ROLE,
    MAX_REPEATS,
    NAME,
    RETIRED_FRAMEWORKS,
    ROLES,
    Autostop,
    Cluster,
    Efs,
    Experiment,
    Fsx,
    GpuNodeGroup,
    HomeConfig,
    LocalRun,
    Network,
    Results,
    StackConfig,
    Storage,
    SystemNodeGroup,
    choices_of,
    default_of,
)
from core.config.pulumi_config import misspelled_key
from core.contract.train_args import SET_BY_RUN, flag_of, is_option, option_field

# Capacity types of an EKS managed node group (EKS API CreateNodegroup capacityType; CAPACITY_BLOCK
# with a launch template that targets the block: EKS user guide, "Capacity Blocks for ML").
CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")


# A home stack's StackReference name: <organization>/<project>/<stack> (Pulumi's fully qualified form;
# "organization" itself for a file or cloud-storage backend).
HOME_STACK = r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+/[A-Za-z0-9._-]{1,100}"
HOME_STACK_EXAMPLE = '"organization/eksbench/home"'
# Keys Pulumi.yaml declares with a default: the CLI hands them to every stack, the home stack too.
PROJECT_DEFAULTS = {"run_id": "run-001", "namespace": "eksbench", "execution": "parallel"}


def stack_role(raw: Mapping[str, Any]) -> str:
    """``eksbench:role``: "home" for the home stack, else "experiment" (also for a malformed value,
    which the parser then reports)."""
    return HOME_ROLE if isinstance(raw, Mapping) and raw.get("role") == HOME_ROLE else "experiment"


def parse_config(raw: Mapping[str, Any], *, project: str, stack: str,
                 region: str | None) -> StackConfig | HomeConfig:
    """Either kind of stack, by its role."""
    if stack_role(raw) == HOME_ROLE:
        return parse_home_config(raw, project=project, stack=stack, region=region)
    return parse_stack_config(raw, project=project, stack=stack, region=region)


def misspelled_namespaces(top: Reader, project: str) -> None:
    """Refuse, by name, each key whose namespace is a typo of a known one (``eksbnech:run_id``: decode_config
    keeps those whole), with the key it was probably meant to be."""
    for key in list(top.data):
        meant = misspelled_key(str(key), project) if ":" in str(key) else None
        if meant:
            top.refused.add(key)
            ns = str(key).partition(":")[0]
            top.fail(str(key), top.data[key], f"unknown namespace {ns!r} (a stack file holds {project}:, aws:, "
                     f"kubernetes:, ... keys), so the key would be ignored; did you mean {meant!r}?")


def parse_home_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None) -> HomeConfig:
    """The home stack: role, tags and nothing an experiment stack has. Raises ConfigError (shape problems)."""
    problems: list[str] = []
    top = Reader(raw, "", problems)
    if not region:
        problems.append('aws:region: is required, e.g. "us-west-2" (pulumi config set aws:region us-west-2)')
    top.string("role", choices=ROLES)
    misspelled_namespaces(top, project)
    for key, default in PROJECT_DEFAULTS.items():
        value = top.raw(key, default)
        if value != default:
            top.fail(key, value, "is an experiment stack's key; the home stack runs nothing: remove it from "
                     f"Pulumi.{stack}.yaml")
    tags = top.string_map("tags")
    experiment_keys = sorted(set(raw) - top.used - top.refused) if isinstance(raw, Mapping) else []
    for key in experiment_keys:
        top.used.add(key)
        top.fail(top.key(str(key)), raw[key], "unknown key in a home stack (role: home), which holds only the "
                 "results/datasets bucket and the image repository; put clusters and experiments in an experiment "
                 "stack whose results.home_stack names this one; allowed keys here: role, tags")
    if problems:
        raise ConfigError(problems)
    return HomeConfig(project=project, stack=stack, region=region, tags=tags)


def parse_stack_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None) -> StackConfig:
    """Parse the ``eksbench:*`` keys (namespace stripped) of one experiment stack. Raises ConfigError (shape problems)."""
    problems: list[str] = []
    top = Reader(raw, "", problems)
    if not region:
        problems.append('aws:region: is required, e.g. "us-west-2" (pulumi config set aws:region us-west-2)')
    if top.string("role", "experiment", choices=ROLES) == HOME_ROLE:
        raise ConfigError([f'role="home": Pulumi.{stack}.yaml is the home stack (results, datasets, image), not an '
                           f"experiment stack: create it with pulumi up -s {stack} (eksbench plan {stack} "
                           f"shows it); run experiments in a stack whose results.home_stack names it"])
    run_id = top.string("run_id", "run-001", pattern=NAME, example='"run-002"')
    namespace = top.string("namespace", "eksbench", pattern=NAME, example='"eksbench"')
    network = _network(Reader(top.mapping("network"), "network", problems))
    cluster = _cluster(Reader(top.mapping("cluster"), "cluster", problems))
    groups = _gpu_groups(top.raw("gpu_node_groups", None), problems)
    system = _system(Reader(top.mapping("system_nodes"), "system_nodes", problems))
    storage = _storage(Reader(top.mapping("storage"), "storage", problems))
    results = _results(Reader(top.mapping("results"), "results", problems))
    datasets_uri = top.s3_uri("datasets_uri", None)
    execution = top.string("execution", "parallel", choices=("parallel", "sequential"))
    local = _local(Reader(top.mapping("local"), "local", problems))
    tags = top.string_map("tags")
    autostop = _autostop(Reader(top.mapping("autostop"), "autostop", problems))
    experiments, sources = _experiments(top.raw("experiments", None), groups, problems,
                                        default_image=training_image(region) if region else DEFAULT_IMAGE,
                                        region=region)
    misspelled_namespaces(top, project)
    top.finish()
    if problems:  # the experiments of one sweep share their entry's problems: each is said once
        raise ConfigError(list(dict.fromkeys(problems)))
    return StackConfig(project=project, stack=stack, region=region, run_id=run_id, namespace=namespace,
                       network=network, cluster=cluster, gpu_node_groups=groups, system_nodes=system,
                       storage=storage, results=results, datasets_uri=datasets_uri, experiments=experiments,
                       execution=execution, local=local, tags=tags, autostop=autostop, experiment_sources=sources)


def _autostop(r: Reader) -> Autostop:
    d = Autostop()
    a = Autostop(enabled=r.boolean("enabled", d.enabled),
                 deadline_minutes=r.integer("deadline_minutes", None, minimum=10, maximum=20160, example="240"),
                 idle_minutes=r.integer("idle_minutes", d.idle_minutes, minimum=1, maximum=1440, example="5"))
    r.finish()
    return a


def _network(r: Reader) -> Network:
    d = Network()
    cidr = r.string("vpc_cidr", d.vpc_cidr, example='"10.0.0.0/16"')
    if isinstance(cidr, str) and cidr_rule(cidr):
        r.fail(r.key("vpc_cidr"), cidr, cidr_rule(cidr), '"10.0.0.0/16"')
    existing = Reader(r.mapping("existing"), r.key("existing"), r.problems)
    vpc_id = existing.string("vpc_id", None, pattern=r"vpc-[0-9a-f]{8,17}", example='"vpc-0123456789abcdef0"')
    subnet = lambda s: "" if re.fullmatch(r"subnet-[0-9a-f]{8,17}", s) else "must be a subnet id"  # noqa: E731
    public = existing.strings("public_subnet_ids", (), check=subnet, example='["subnet-0123456789abcdef0"]')
    private = existing.strings("private_subnet_ids", (), check=subnet, example='["subnet-0123456789abcdef0"]')
    existing.finish()
    azs = r.strings("azs", (), example='["us-west-2a", "us-west-2b", "us-west-2c"]',
                    check=lambda z: "" if re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d[a-z]", z) else "must be a zone name")
    net = Network(
        vpc_cidr=cidr,
        az_count=r.integer("az_count", d.az_count, minimum=2, maximum=6, example="3"),
        nat=r.string("nat", d.nat, choices=("single", "per_az")),
        existing_vpc_id=vpc_id, existing_public_subnet_ids=public, existing_private_subnet_ids=private, azs=azs)
    r.finish()
    return net


def _cluster(r: Reader) -> Cluster:
    d = Cluster()
    default = f'"{d.kubernetes_version}"'
    version = r.string("kubernetes_version", d.kubernetes_version, example=default)
    if isinstance(version, str) and version not in catalog.EKS_VERSIONS:
        r.fail(r.key("kubernetes_version"), version,
               f"EKS offers {', '.join(catalog.EKS_VERSIONS)} (as of {catalog.EKS_CALENDAR_CHECKED})", default)
    c = Cluster(
        kubernetes_version=version,
        # None when absent: program.validation asks for an explicit choice.
        public_access_cidrs=r.strings("public_access_cidrs", None, check=cidr_rule,
                                      example='["<your address>/32"] or [] (private endpoint only)'),
        admin_role_arns=r.strings("admin_role_arns", (), example='["arn:aws:iam::123456789012:role/Admin"]',
                                  check=lambda s: "" if re.fullmatch(r"arn:aws[\w-]*:iam::\d{12}:role/.+", s)
                                  else "must be an IAM role ARN"),
        log_types=r.strings("log_types", d.log_types, example='["api", "audit"]',
                            check=lambda s: "" if s in ("api", "audit", "authenticator", "controllerManager",
                                                        "scheduler") else
                            "must be one of api, audit, authenticator, controllerManager, scheduler"))
    r.finish()
    return c


def _gpu_groups(raw: Any, problems: list[str]) -> tuple[GpuNodeGroup, ...]:
    if raw is None:
        problems.append('gpu_node_groups: is required, e.g. [{"name": "gpu", "instance_type": "p3.16xlarge"}]')
        return ()
    return _items(raw, "gpu_node_groups", _gpu_group, problems, non_empty=True, what="node groups",
                  example='[{"name": "gpu", "instance_type": "p3.16xlarge"}]')


def _items(raw: Any, key: str, parse, problems: list[str], *, non_empty: bool, what: str, example: str) -> tuple:
    """Each item of the list at ``key`` through ``parse(Reader)``; the items whose shape is clean."""
    if not isinstance(raw, list) or (non_empty and not raw):
        problems.append(f"{key}={show(raw)}: must be a {'non-empty ' if non_empty else ''}list of {what}, "
                        f"e.g. {example}")
        return ()
    out = []
    for i, item in enumerate(raw):
        r = Reader(item, f"{key}[{i}]", problems)
        parsed = parse(r)
        r.finish()
        if parsed is not None:
            out.append(parsed)
    return tuple(out)


def _gpu_group(r: Reader) -> GpuNodeGroup | None:
    n0 = len(r.problems)
    name = r.string("name", pattern=NAME, example='"gpu"')
    itype = r.string("instance_type", example='"p3.16xlarge"')
    spec = catalog.INSTANCE_TYPES.get(itype) if isinstance(itype, str) else None
    if isinstance(itype, str):
        if spec is None:
            gpu_types = ", ".join(n for n, t in catalog.INSTANCE_TYPES.items() if t.gpus)
            r.fail(r.key("instance_type"), itype, f"not in the instance catalog; GPU types: {gpu_types}",
                   '"g6e.48xlarge"')
        elif not spec.gpus:
            r.fail(r.key("instance_type"), itype, f"is not a GPU instance type; choose one of "
                   f"{', '.join(catalog.GPU_ALTERNATIVES)}", '"p4d.24xlarge"')
    g = lambda name: default_of(GpuNodeGroup, name)  # noqa: E731 - the dataclass holds the defaults
    ami = r.string("ami_type", g("ami_type"), choices=catalog.GPU_AMI_TYPES)
    min_size = r.integer("min_size", g("min_size"), minimum=0, example="0")
    max_size = r.integer("max_size", g("max_size"), minimum=1, example="2")
    desired = r.integer("desired_size", max_size if isinstance(max_size, int) else g("desired_size"), minimum=0,
                        example="2")
    efa_raw = r.raw("efa", "auto")
    if efa_raw == "auto":
        efa = bool(spec and spec.efa)
    elif isinstance(efa_raw, bool):
        efa = efa_raw
    else:
        r.fail(r.key("efa"), efa_raw, 'must be "auto", true or false', '"auto"')
        efa = False
    capacity = r.string("capacity_type", g("capacity_type"), choices=CAPACITY_TYPES)
    pg_raw = r.raw("placement_group", "auto")
    if pg_raw == "auto":
        # A Capacity Block is already placed by AWS (EC2 UltraClusters); a placement group of our own
        # would not match the reservation.
        placement = efa and capacity != "CAPACITY_BLOCK"
    elif isinstance(pg_raw, bool):
        placement = pg_raw
    else:
        r.fail(r.key("placement_group"), pg_raw, 'must be "auto", true or false', '"auto"')
        placement = False
    group = dict(
        name=name, instance_type=itype, ami_type=ami, desired_size=desired, min_size=min_size, max_size=max_size,
        disk_size_gib=r.integer("disk_size_gib", g("disk_size_gib"), minimum=100, maximum=16384, example="200"),
        capacity_type=capacity,
        capacity_reservation_id=r.string("capacity_reservation_id", None, pattern=r"cr-[0-9a-f]{8,17}",
                                         example='"cr-0123456789abcdef0"'),
        availability_zone=r.string("availability_zone", None, pattern=r"[a-z]{2}(-[a-z]+)+-\d[a-z]",
                                   example='"us-east-1a"'),
        subnet_id=r.string("subnet_id", None, pattern=r"subnet-[0-9a-f]{8,17}", example='"subnet-0123456789abcdef0"'),
        multi_zone_reason=r.string("multi_zone_reason", None,
                                   example='"p5 capacity is short in any one zone"'),
        efa=efa, placement_group=placement, labels=r.string_map("labels"),
        autoscale=r.boolean("autoscale", g("autoscale")))
    return None if len(r.problems) > n0 else GpuNodeGroup(**group)


def _system(r: Reader) -> SystemNodeGroup:
    d = SystemNodeGroup()
    itype = r.string("instance_type", d.instance_type, example='"m6i.large"')
    if isinstance(itype, str) and itype not in catalog.INSTANCE_TYPES:
        cpu = ", ".join(n for n, t in catalog.INSTANCE_TYPES.items() if not t.gpus)
        r.fail(r.key("instance_type"), itype, f"not in the instance catalog; CPU types: {cpu}", '"m6i.large"')
    s = SystemNodeGroup(
        instance_type=itype,
        min_size=r.integer("min_size", d.min_size, minimum=1, example="1"),
        max_size=r.integer("max_size", d.max_size, minimum=1, example="3"),
        desired_size=r.integer("desired_size", d.desired_size, minimum=1, example="2"),
        disk_size_gib=r.integer("disk_size_gib", d.disk_size_gib, minimum=20, example="50"))
    r.finish()
    return s


def _storage(r: Reader) -> Storage:
    d = Storage()
    kind = r.string("kind", d.kind, choices=("efs", "fsx"))
    mount = r.string("mount_path", d.mount_path, pattern=r"/[A-Za-z0-9_/.-]*", example='"/data"')
    preload = r.boolean("preload", d.preload)
    e = Reader(r.mapping("efs"), r.key("efs"), r.problems)
    efs = Efs(throughput_mode=e.string("throughput_mode", d.efs.throughput_mode, choices=("elastic", "bursting")),
              performance_mode=e.string("performance_mode", d.efs.performance_mode,
                                        choices=("generalPurpose", "maxIO")))
    e.finish()
    f = Reader(r.mapping("fsx"), r.key("fsx"), r.problems)
    deployment = f.string("deployment_type", d.fsx.deployment_type, choices=("PERSISTENT_2", "SCRATCH_2"))
    capacity = f.integer("storage_capacity_gib", d.fsx.storage_capacity_gib, minimum=1200, example="1200")
    # FSx for Lustre: SSD capacity is 1200 GiB or a multiple of 2400 GiB (PERSISTENT_2, SCRATCH_2).
    if isinstance(capacity, int) and capacity != 1200 and capacity % 2400:
        f.fail(f.key("storage_capacity_gib"), capacity, "must be 1200 or a multiple of 2400 (FSx for Lustre SSD)",
               "2400")
    throughput = f.integer("per_unit_storage_throughput", d.fsx.per_unit_storage_throughput, example="250")
    if isinstance(throughput, int) and throughput not in catalog.FSX_PERSISTENT_2_USD_PER_GIB_MONTH:
        f.fail(f.key("per_unit_storage_throughput"), throughput, "must be one of 125, 250, 500, 1000 (MB/s/TiB)",
               "250")
    f.finish()
    r.finish()
    return Storage(kind=kind, mount_path=mount, preload=preload, efs=efs,
                   fsx=Fsx(deployment_type=deployment, storage_capacity_gib=capacity,
                           per_unit_storage_throughput=throughput))


def _results(r: Reader) -> Results:
    home = r.string("home_stack", None, pattern=HOME_STACK, example=HOME_STACK_EXAMPLE)
    bucket = r.string("bucket", None, pattern=r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", example='"my-results-bucket"')
    r.finish()
    return Results(home_stack=home, bucket=bucket)


def _local(r: Reader) -> LocalRun:
    d = LocalRun()
    local = LocalRun(
        nodes=r.integer("nodes", d.nodes, minimum=1, maximum=8, example="2"),
        procs_per_node=r.integer("procs_per_node", d.procs_per_node, minimum=1, maximum=8, example="1"),
        steps=r.integer("steps", d.steps, minimum=1, example="30"),
        batch_size=r.integer("batch_size", d.batch_size, minimum=1, example="8"),
        image_size=r.integer("image_size", d.image_size, minimum=32, maximum=512, example="64"),
        width_per_group=r.integer("width_per_group", d.width_per_group, minimum=1, maximum=64, example="16"),
        timeout_minutes=r.integer("timeout_minutes", d.timeout_minutes, minimum=1, example="10"))
    r.finish()
    return local


def _experiments(raw: Any, groups: tuple[GpuNodeGroup, ...], problems: list[str], *, default_image: str,
                 region: str | None) -> tuple[tuple[Experiment, ...], tuple[int, ...]]:
    """The experiments, sweeps expanded (``core.config.sweep``), and the stack-file index each came from."""
    if not isinstance(raw, list):
        return _items(raw, "experiments", None, problems, non_empty=False, what="experiments",
                      example='[{"name": "resnet50", "workload": "resnet50"}]') if raw is not None else (), ()
    if refused := sweep.too_many(raw, max_repeats=MAX_REPEATS):
        problems.append(refused)
        return (), ()
    out = []
    for x in sweep.expand(raw, problems, batch_max=BATCH_SIZE_MAX):
        r = Reader(x.item, f"experiments[{x.source}]", problems)
        parsed = _experiment(r, groups, default_image, region, entry=x.sweep)
        r.finish()
        out += [(parsed, x.source)] if parsed is not None else []
    return tuple(e for e, _ in out), tuple(i for _, i in out)


def _number(r: Reader, name: str, default: float | None, *, minimum: float, maximum: float,
            example: str) -> float | None:
    """A number (integer or decimal) between ``minimum`` and ``maximum``; ``default`` when absent."""
    value = r.raw(name, default)
    if value is None or value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        r.fail(r.key(name), value, "must be a number", example)
        return default
    if not minimum <= value <= maximum:
        r.fail(r.key(name), value, f"must be between {minimum:g} and {maximum:g}", example)
        return default
    return float(value)


def _trainer_args(r: Reader, experiment: Any) -> tuple[str, ...]:
    """An experiment's ``args``: options the trainers take, none of them one the stack sets (TrainArgs' ``stack_key``:
    given after the contract's arguments, it would win, and the plan, the summary and the report would show what
    did not run). Prefixes count as argparse reads them (core.contract.train_args.option_field)."""
    args = r.strings("args", default_of(Experiment, "args"), example='["--lr", "0.1"]')
    who = f"experiment {show(experiment)}"
    for i, token in enumerate(args):
        f = option_field(token) if is_option(token) else None
        key, owner = f"{r.key('args')}[{i}]", f.metadata["stack_key"] if f else None
        if is_option(token) and f is None:
            r.fail(key, token, f"{who}: the trainers take no such option (python -m workloads.train.pytorch --help "
                   "lists theirs)", '"--lr=0.1"')
        elif owner == SET_BY_RUN:
            r.fail(key, token, f"{who} would set the trainers' {flag_of(f)}, which eksbench sets for every run (the "
                   "launcher reads the run's metrics, checkpoints and logs there and uploads them): remove it")
        elif owner is not None:
            whose = "the stack file's key" if "." in owner else "the experiment's own key"
            value = token.partition("=")[2] or next(iter(args[i + 1:i + 2]), "")
            value = ("false" if token.startswith("--no-") else "true") if isinstance(f.default, bool) else value
            r.fail(key, token, f"{who} would set the trainers' {flag_of(f)}, which {whose} {owner} sets (the plan, "
                   "the summary and the report read it there): use that key instead", f"{owner}: {value}" if value
                   else owner)
    return args


def _experiment(r: Reader, groups: tuple[GpuNodeGroup, ...], default_image: str = DEFAULT_IMAGE,
                region: str | None = None, entry: str | None = None) -> Experiment | None:
    """One experiment; ``entry``: the name of the sweep it was expanded from (its problems name that)."""
    n0 = len(r.problems)
    name = r.string("name", pattern=NAME, example='"resnet50-8gpu"')
    d = lambda name: default_of(Experiment, name)  # noqa: E731 - the dataclass holds the defaults
    framework = r.raw("framework", d("framework"))
    if framework in RETIRED_FRAMEWORKS:
        r.fail(r.key("framework"), framework, RETIRED_FRAMEWORKS[framework], '"pytorch"')
    elif framework not in choices_of(Experiment, "framework"):
        r.fail(r.key("framework"), framework, f"must be one of {', '.join(choices_of(Experiment, 'framework'))}",
               '"pytorch"')
    nodes_raw = r.raw("nodes", d("max_nodes"))
    min_nodes = max_nodes = None
    if isinstance(nodes_raw, int) and not isinstance(nodes_raw, bool) and nodes_raw >= 1:
        min_nodes = max_nodes = nodes_raw
    elif isinstance(nodes_raw, str) and re.fullmatch(r"\d+:\d+", nodes_raw):
        min_nodes, max_nodes = (int(x) for x in nodes_raw.split(":"))
        if not 1 <= min_nodes <= max_nodes:
            r.fail(r.key("nodes"), nodes_raw, "min:max needs 1 <= min <= max", '"2:4"')
    elif isinstance(nodes_raw, str) and re.fullmatch(r"\d+", nodes_raw) and int(nodes_raw) >= 1:
        min_nodes = max_nodes = int(nodes_raw)
    else:
        r.fail(r.key("nodes"), nodes_raw, 'must be a node count >= 1, "min:max" for an elastic run, or a list of '
               "counts for a sweep", '"2:4"')
    group_name = r.string("node_group", groups[0].name if groups else "", example='"gpu"')
    group = next((g for g in groups if g.name == group_name), None)
    if group is not None:  # the framework's image with kernels for the group's GPUs that fits its driver (compat.py)
        default_image = compat.default_image(group.instance_type, group.ami_type, region or catalog.DEFAULT_REGION, framework)
    elif framework == "paddle":  # no group to fit: paddle's one image, from Docker Hub (no region to follow)
        default_image = PADDLE_IMAGE
    # Every GPU of the node unless asked otherwise (program.validation checks it against the group).
    per_node = max(group.gpus_per_node, 1) if group else 1
    gpus = r.integer("gpus_per_node", per_node, minimum=1, example=str(per_node))
    dataset = r.string("dataset", d("dataset"), example='"synthetic"')
    e = dict(
        name=name, framework=framework, min_nodes=min_nodes, max_nodes=max_nodes, gpus_per_node=gpus,
        workload=r.string("workload", d("workload"), choices=choices_of(Experiment, "workload")),
        batch_size=r.integer("batch_size", d("batch_size"), minimum=1, maximum=BATCH_SIZE_MAX, example="256"),
        precision=r.string("precision", d("precision"), choices=choices_of(Experiment, "precision")),
        steps=r.integer("steps", d("steps"), minimum=1, example="500"),
        epochs=r.integer("epochs", d("epochs"), minimum=0, example="10"),
        dataset=dataset,
        image=r.string("image", default_image, pattern=r"[\w.\-/:]+(:[\w.\-]+|@sha256:[0-9a-f]{64})",
                       example=f'"{default_image}"'),
        args=_trainer_args(r, entry or name),
        timeout_minutes=r.integer("timeout_minutes", d("timeout_minutes"), minimum=1, maximum=10080, example="120"),
        rdzv_backend=r.string("rdzv_backend", d("rdzv_backend"), choices=choices_of(Experiment, "rdzv_backend")),
        max_restarts=r.integer("max_restarts", d("max_restarts"), minimum=0, maximum=100, example="3"),
        checkpoint_every=r.integer("checkpoint_every", d("checkpoint_every"), minimum=0, example="500"),
        checkpoint_minutes=_number(r, "checkpoint_minutes", d("checkpoint_minutes"), minimum=0, maximum=1440,
                                   example="10"),
        evaluate=r.boolean("evaluate", d("evaluate")),
        channels_last=r.boolean("channels_last", d("channels_last")),
        compile=r.boolean("compile", d("compile")),
        compile_mode=r.string("compile_mode", d("compile_mode"), choices=choices_of(Experiment, "compile_mode")),
        target_accuracy=_number(r, "target_accuracy", d("target_accuracy"), minimum=0, maximum=1, example="0.9"),
        input_path=r.string("input_path", d("input_path"), choices=choices_of(Experiment, "input_path")),
        node_group=group_name,
        pservers=r.integer("pservers", d("pservers"), minimum=1, maximum=64, example="2"),
        fabric=r.string("fabric", d("fabric"), choices=choices_of(Experiment, "fabric")),
        repeats=r.integer("repeats", d("repeats"), minimum=1, maximum=MAX_REPEATS, example="3"))
    image = e["image"]
    if isinstance(image, str) and (image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]):
        r.fail(r.key("image"), image, "must pin a version tag or digest (not latest)", f'"{default_image}"')
    return None if len(r.problems) > n0 else Experiment(**e)
