"""The second validation stage, meaning: one function that returns every problem, run once.

``core.config.shape`` has checked keys, types and single values. Here the rules that relate values
to each other and to the world: node group sizes (min <= desired <= max), EFA on a type
that has it, an existing VPC with two private subnets, FSx-only options, unique names, each
experiment's node group, nodes and GPUs, its dataset in the catalog, its framework/workload
pairing (``workloads.experiment_checks``), Kubernetes object names no two runs share, the region's
instance offerings and the shipped entry points. It runs only on a config whose shape is clean,
so a default that stood in for a bad value is never judged. ``program.stack`` calls it before
registering any resource; ``bench`` calls it (without offerings) before a local run.
"""

from __future__ import annotations

from typing import Any, Mapping

from core.catalog import aws as catalog
from core.catalog import compat
from core.catalog.peaks import NO_BF16
from core.catalog.pins import CLUSTER_AUTOSCALER_CHARTS, DEFAULT_EKS_VERSION, EKS_ADDON_REGISTRY_ACCOUNTS
from core.config.autostop import deadline_problems
from core.config.fields import (
    ConfigError,
    documentation_cidr,
    placeholder_bucket,
    problem,
    show,
)
from core.config.model import Experiment, GpuNodeGroup, StackConfig
from core.config.shape import HOME_STACK_EXAMPLE, parse_stack_config
from core.contract.s3_uri import parse_s3_uri
from datasets.catalog import DATASET_NAMES, dataset
from infra.cluster.autoscaling import missing_efa_tags, node_template_tags
from infra.cluster.offerings import offering_problems
from workloads.experiment_checks import check_experiment, missing_entry_points
from workloads.object_names import object_names


def meaning_problems(cfg: StackConfig, *, offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None, today: str | None = None,
                     zones: Mapping[str, str] | None = None, cluster: bool = True) -> list[str]:
    """Every meaning problem of a shape-clean config. ``offered`` (instance type -> zones),
    ``code_files`` (the shipped sources), ``today`` (ISO date: the caller's clock, for the EKS
    version calendar) and ``zones`` (the region's usable zone names -> zone ids) are checked when given.
    ``cluster``: the config is for the cluster (the program, ``bench run``, preflight); False for a local run and
    for commands that only read results, which need not refuse what only the cluster cannot run."""
    problems = (_region(cfg) + _cluster(cfg, today, cluster) + _node_groups(cfg) + _network(cfg, zones)
                + _storage(cfg) + _datasets(cfg, cluster) + _experiments(cfg) + name_collisions(cfg) + image_problems(cfg)
                + (gpu_training_problems(cfg) if cluster else []))
    problems += _fsx_deployment(cfg) + _parallel_gpus(cfg) + deadline_problems(cfg)
    if offered is not None:
        problems += offering_problems(cfg, offered)
    if code_files is not None:
        problems += missing_entry_points(cfg.experiments, code_files)
    return list(dict.fromkeys(problems))  # the experiments of one sweep (core.config.sweep) share their entry's key


def validated_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None,
                     offered: Mapping[str, set[str]] | None = None,
                     code_files: Mapping[str, str] | None = None, today: str | None = None,
                     cluster: bool = True) -> StackConfig:
    """Shape, then (only if the shape is clean) meaning. Raises ConfigError with every problem of the stage."""
    cfg = parse_stack_config(raw, project=project, stack=stack, region=region)
    problems = meaning_problems(cfg, offered=offered, code_files=code_files, today=today, cluster=cluster)
    if problems:
        raise ConfigError(problems)
    return cfg


def _sizes(key: str, min_size: int, max_size: int, desired: int, *, desired_example: int) -> list[str]:
    if max_size < min_size:
        return [problem(f"{key}.max_size", max_size, f"must be >= min_size ({min_size})", str(max(min_size, 1)))]
    if not min_size <= desired <= max_size:
        return [problem(f"{key}.desired_size", desired,
                        f"must be between min_size ({min_size}) and max_size ({max_size})", str(desired_example))]
    return []


PRIVATE_ENDPOINT_HINT = ('your own addresses, e.g. ["<your public IP>/32"] (curl https://checkip.amazonaws.com), '
                         'or [] for a private endpoint only (then run pulumi up from inside the VPC)')


def _cluster(cfg: StackConfig, today: str | None, cluster: bool = True) -> list[str]:
    """The API endpoint's exposure is an explicit choice (for a stack that builds the cluster); the version can
    still be created on ``today``."""
    out, c = [], cfg.cluster
    if c.public_access_cidrs is None and cluster:
        out.append(f"cluster.public_access_cidrs: is required: who may reach the Kubernetes API endpoint; "
                   f"{PRIVATE_ENDPOINT_HINT}")
    else:
        for i, cidr in enumerate(c.public_access_cidrs or ()):
            if documentation_cidr(cidr):
                out.append(problem(f"cluster.public_access_cidrs[{i}]", cidr,
                                   "is a documentation range (RFC 5737) that routes nowhere, so nobody, you included, "
                                   f"could reach the API; put {PRIVATE_ENDPOINT_HINT}"))
    if today is not None and catalog.eks_support(c.kubernetes_version, today) == "ended":
        v = catalog.EKS_CALENDAR[c.kubernetes_version]
        current = [x for x in catalog.EKS_VERSIONS if catalog.eks_support(x, today) != "ended"]
        out.append(problem("cluster.kubernetes_version", c.kubernetes_version,
                           f"extended support ended on {v.end_of_extended}, so EKS no longer creates it; "
                           f"choose one of {', '.join(current)}", show(DEFAULT_EKS_VERSION)))
    if any(g.efa for g in cfg.gpu_node_groups) and cfg.region and cfg.region not in EKS_ADDON_REGISTRY_ACCOUNTS:
        out.append(problem("aws:region", cfg.region,
                           "the EFA device plugin's registry account for this region is not known to eksbench "
                           "(core/catalog/pins.py EKS_ADDON_REGISTRY_ACCOUNTS, from the AWS docs' \"Amazon container image "
                           "registries\" table); add it there, or use one of "
                           + ", ".join(sorted(EKS_ADDON_REGISTRY_ACCOUNTS)), '"us-east-1"'))
    return out


def known_regions() -> set[str]:
    """Every region of every partition in botocore's endpoint data (``botocore/data/endpoints.json``), where EKS
    is offered: what AWS can build a cluster in, as far as the SDK the program runs on knows."""
    import botocore.session

    session = botocore.session.get_session()
    return {r for p in session.get_available_partitions() for r in session.get_available_regions("eks", p)}


def _region(cfg: StackConfig) -> list[str]:
    """A region AWS has (offline, the mock engine would answer for any name: invented zones, invented offers)."""
    known = known_regions()
    if not cfg.region or not known or cfg.region in known:
        return []
    return [problem("aws:region", cfg.region, f"is not an AWS region with EKS in botocore's endpoint data; the "
                    f"{len(known)} known are {', '.join(sorted(known))}", '"us-west-2"')]


def _single_zone(cfg: StackConfig, key: str, g: GpuNodeGroup, why: str) -> list[str]:
    """A group that must sit in one zone has one: chosen from the network, or named for an existing VPC."""
    n = cfg.network
    if n.existing_vpc_id and not g.subnet_id:
        return [f"{key}.subnet_id: is required with {why} in an existing VPC: the one private subnet (one zone) "
                f"the nodes go in, one of {', '.join(n.existing_private_subnet_ids)}"]
    return []


def _node_group_placement(cfg: StackConfig, i: int, g: GpuNodeGroup) -> list[str]:
    key, out, n = f"gpu_node_groups[{i}]", [], cfg.network
    if g.efa and not catalog.INSTANCE_TYPES[g.instance_type].efa:
        out.append(problem(f"{key}.efa", True, f'{g.instance_type} does not support EFA; use "auto" or false',
                           '"auto"'))
    if g.capacity_type == "CAPACITY_BLOCK":
        if not g.capacity_reservation_id:
            out.append(f'{key}.capacity_reservation_id: is required with capacity_type "CAPACITY_BLOCK": the '
                       'Capacity Block\'s reservation id, e.g. "cr-0123456789abcdef0" (EC2 console, Capacity '
                       'Reservations)')
        if not g.availability_zone and not g.subnet_id:
            out.append(f'{key}.availability_zone: is required with capacity_type "CAPACITY_BLOCK": the zone the '
                       'block was bought in, e.g. "us-east-1a" (a block serves one zone)')
        if g.placement_group:
            out.append(problem(f"{key}.placement_group", True,
                               "a Capacity Block is already placed by AWS; a placement group of our own does not "
                               "match the reservation and the launch fails; set it to false or \"auto\"", "false"))
    elif g.capacity_reservation_id:
        out.append(problem(f"{key}.capacity_reservation_id", g.capacity_reservation_id,
                           f'applies to capacity_type "CAPACITY_BLOCK" only (here {g.capacity_type})',
                           'capacity_type: "CAPACITY_BLOCK"'))
    if g.autoscale and g.capacity_type == "CAPACITY_BLOCK":
        out.append(problem(f"{key}.autoscale", True, f"node group {g.name!r} is a Capacity Block, which bills the whole "
                           "block whatever runs: scaling it down saves nothing; set it to false", "false"))
    if g.efa or g.placement_group or g.capacity_type == "CAPACITY_BLOCK":
        why = "efa" if g.efa else "placement_group" if g.placement_group else "a Capacity Block"
        out += _single_zone(cfg, key, g, why)
    if g.subnet_id and not n.existing_vpc_id:
        out.append(problem(f"{key}.subnet_id", g.subnet_id, "applies to an existing VPC (network.existing) only; "
                           "with a created VPC set availability_zone instead", '"us-east-1a"'))
    elif g.subnet_id and g.subnet_id not in n.existing_private_subnet_ids:
        out.append(problem(f"{key}.subnet_id", g.subnet_id, "must be one of network.existing.private_subnet_ids",
                           show(n.existing_private_subnet_ids[0] if n.existing_private_subnet_ids else "subnet-...")))
    if g.availability_zone and n.azs and g.availability_zone not in n.azs:
        out.append(problem(f"{key}.availability_zone", g.availability_zone,
                           f"must be one of network.azs ({', '.join(n.azs)})", show(n.azs[0])))
    return out


def _node_groups(cfg: StackConfig) -> list[str]:
    out, seen = [], set()
    for i, g in enumerate(cfg.gpu_node_groups):
        key = f"gpu_node_groups[{i}]"
        if g.name in seen:
            out.append(problem(f"{key}.name", g.name, "must be unique among gpu_node_groups", '"gpu-b"'))
        seen.add(g.name)
        out += _sizes(key, g.min_size, g.max_size, g.desired_size, desired_example=g.max_size)
        out += _node_group_placement(cfg, i, g)
    out += autoscaler_problems(cfg)
    s = cfg.system_nodes
    return out + _sizes("system_nodes", s.min_size, s.max_size, s.desired_size, desired_example=s.min_size)


def autoscaler_problems(cfg: StackConfig) -> list[str]:
    """Groups that opt in to Cluster Autoscaler: a chart pinned for the cluster's minor (core/catalog/pins.py),
    and on EFA groups the node-template tags for both EFA resources (infra/cluster/autoscaling.py says why)."""
    opted = [(i, g) for i, g in enumerate(cfg.gpu_node_groups) if g.autoscale]
    out = []
    minor = ".".join(cfg.cluster.kubernetes_version.split(".")[:2])
    if opted and minor not in CLUSTER_AUTOSCALER_CHARTS:
        out.append(problem("cluster.kubernetes_version", cfg.cluster.kubernetes_version,
                           f"has no Cluster Autoscaler chart pinned, which gpu_node_groups[{opted[0][0]}].autoscale "
                           f"needs (its minor must match the cluster's); pinned: {', '.join(CLUSTER_AUTOSCALER_CHARTS)}",
                           show(list(CLUSTER_AUTOSCALER_CHARTS)[-1])))
    for i, g in opted:
        missing = missing_efa_tags(g, node_template_tags(g))
        if missing:
            out.append(problem(f"gpu_node_groups[{i}].autoscale", True, f"EFA group {g.name!r} lacks the node-template "
                               f"tags for {', '.join(missing)}: scaled from 0, no EFA pod would fit it", "false"))
    return out


def _network(cfg: StackConfig, zones: Mapping[str, str] | None) -> list[str]:
    n, out = cfg.network, []
    if n.existing_vpc_id and len(n.existing_private_subnet_ids) < 2:
        out.append(problem("network.existing.private_subnet_ids", list(n.existing_private_subnet_ids),
                           "an existing VPC needs at least two private subnets in different AZs (EKS requires two AZs)",
                           '["subnet-0a...", "subnet-0b..."]'))
    if n.azs:
        if len(set(n.azs)) < 2:
            out.append(problem("network.azs", list(n.azs), "needs at least two distinct zones (EKS requires two)",
                               '["us-west-2a", "us-west-2b"]'))
        if zones is not None:
            for i, z in enumerate(n.azs):
                if z not in zones:
                    out.append(problem(f"network.azs[{i}]", z, f"is not a zone of {cfg.region} where EKS runs its "
                                       f"control plane; zones there: {', '.join(zones)}",
                                       show(next(iter(zones), "us-west-2a"))))
    return out


def _storage(cfg: StackConfig) -> list[str]:
    out, s = [], cfg.storage
    if s.preload and s.kind != "fsx":
        out.append(problem("storage.preload", True, f'applies to storage.kind "fsx" only (kind is '
                           f'{show(s.kind)}); remove it', "storage.kind: fsx"))
    # EFS: "Elastic throughput is available only for file systems that use the General Purpose
    # performance mode" (Amazon EFS user guide, "Throughput modes").
    if s.kind == "efs" and s.efs.throughput_mode == "elastic" and s.efs.performance_mode == "maxIO":
        out.append(problem("storage.efs.performance_mode", "maxIO",
                           'EFS Elastic throughput requires the General Purpose performance mode; use '
                           '"generalPurpose", or throughput_mode "bursting"', '"generalPurpose"'))
    return out


def _datasets(cfg: StackConfig, cluster: bool = True) -> list[str]:
    """Results and prepared datasets need a place that outlives this stack and exists before it does.

    That is the home stack (``results.home_stack``: its bucket holds ``<project>/<stack>/...`` results and
    ``datasets/``) or an existing ``results.bucket``; an experiment stack never creates or deletes it.
    ``datasets_uri`` moves the datasets elsewhere but the results still need one of the two. A local run
    (``cluster`` False) needs neither: its results stay on this machine.
    """
    out = []
    needs = [(i, e.dataset) for i, e in enumerate(cfg.experiments)
             if e.dataset in DATASET_NAMES and dataset(e.dataset).needs_staging]
    if cfg.results.home_stack and cfg.results.bucket:
        out.append(problem("results.bucket", cfg.results.bucket, "and results.home_stack are both set; results go "
                           "to one place: keep home_stack (the home stack's bucket) or bucket (an existing one)"))
    elif not cfg.results.home_stack and not cfg.results.bucket and cluster:  # a local run writes here only
        why = (f"{cfg.experiment_key(needs[0][0])} trains on the prepared dataset {needs[0][1]!r}, read from the home "
               f"stack's datasets/ prefix, and results" if needs else "results")
        out.append(f"results.home_stack: is required: {why} go to a bucket this stack never creates or deletes; "
                   f"create the home stack once (pulumi up -s home) and set results.home_stack to its name, e.g. "
                   f"{HOME_STACK_EXAMPLE} (file backend) or \"<your org>/eksbench/home\" (Pulumi Cloud), or set "
                   f"results.bucket to an existing bucket")
    for key, bucket in (("datasets_uri", parse_s3_uri(cfg.datasets_uri)[0] if cfg.datasets_uri else None),
                        ("results.bucket", cfg.results.bucket)):
        if bucket and placeholder_bucket(bucket):
            value = cfg.datasets_uri if key == "datasets_uri" else bucket
            out.append(problem(key, value, "names a placeholder bucket copied from an example; put a bucket you "
                               "own (for datasets_uri, the prefix you prepared datasets under with "
                               "eksbench data prepare)"))
    return out


def _experiments(cfg: StackConfig) -> list[str]:
    out, seen = [], set()
    groups = cfg.node_groups
    for i, e in enumerate(cfg.experiments):
        key = cfg.experiment_key(i)
        if e.name in seen:
            out.append(problem(f"{key}.name", e.name, "must be unique among experiments", f'"{e.name}-2"'))
        seen.add(e.name)
        group = groups.get(e.node_group)
        if group is None:
            out.append(problem(f"{key}.node_group", e.node_group,
                               f"must name a GPU node group: {', '.join(groups)}", show(cfg.gpu_node_groups[0].name)))
        else:
            out += _fits(key, e, group)
        if e.dataset not in DATASET_NAMES:
            out.append(problem(f"{key}.dataset", e.dataset, f"must be one of {', '.join(DATASET_NAMES)}",
                               show(DATASET_NAMES[0])))
        else:
            out += [f"{key}.{p}" for p in check_experiment(e)]
    return out


# How a message names each object of a run (the roles of object_names.object_names).
OBJECT_ROLES = {"svc": "Service", "job": "training Job", "pserver": "pserver Job", "eval": "evaluation Job",
                "eval-gate": "evaluation gate", "gate": "gate Job and its RBAC"}


def name_collisions(cfg: StackConfig) -> list[str]:
    """No two runs (experiments and their repeats) give a Kubernetes object the same name.

    Each name is a valid label on its own (``core.contract.k8s_names``), and one that had to be cut or changed ends
    with a hash of its parts; but two names that need no change can still join to the same text: "a-r1"
    and "a" repeat 1 with run id "r1" are both "a-r1-r1", and experiment "a-eval" trains in the Job
    "a-eval-eval" that is also the evaluation Job of "a" with run id "eval". The second object would
    replace or be refused by the first. Experiments that share a name are reported by ``_experiments``.
    """
    out, first = [], {}  # name -> (experiment index, run, roles of that run with the name)
    reported = set()
    for i, e in enumerate(cfg.experiments):
        for run in e.runs():
            mine: dict[str, list[str]] = {}
            for role, name in object_names(run, cfg.run_id).items():
                mine.setdefault(name, []).append(role)
            for name, roles in mine.items():
                j, other, other_roles = first.setdefault(name, (i, run, roles))
                if (j, other) == (i, run) or other.name == run.name or (j, other, i, run) in reported:
                    continue
                reported.add((j, other, i, run))
                what = lambda rs: " and ".join(OBJECT_ROLES[r] for r in rs)  # noqa: E731
                out.append(problem(
                    f"{cfg.experiment_key(i)}.name", e.name,
                    f"the {what(roles)} of {show(run.label)} would be named {show(name)} (run id {show(cfg.run_id)}), "
                    f"and so would the {what(other_roles)} of {cfg.experiment_key(j)} {show(other.label)}: Kubernetes "
                    f"names in one namespace must be unique; rename one", show(f"{e.name[:30]}-2")))
    return out


def _fits(key: str, e: Experiment, group: GpuNodeGroup) -> list[str]:
    """The experiment's pods fit its node group: GPUs per node, nodes within max_size, and a
    precision its GPUs have (bf16 needs Ampere or later: not V100 or T4)."""
    out = []
    model = catalog.INSTANCE_TYPES[group.instance_type].gpu_model
    if e.precision == "bf16" and model in NO_BF16:
        out.append(problem(f"{key}.precision", e.precision, f"{model} GPUs ({group.instance_type}, node group "
                           f"{group.name!r}) have no bf16 support; use amp-fp16 there, or bf16 on A10G, L4, L40S, "
                           f"A100, H100 or H200", '"amp-fp16"'))
    if e.gpus_per_node > group.gpus_per_node:
        out.append(problem(f"{key}.gpus_per_node", e.gpus_per_node, f"must be <= {group.gpus_per_node}",
                           str(group.gpus_per_node)))
    if e.fabric == "strict" and not group.efa:
        out.append(problem(f"{key}.fabric", e.fabric, f"judges NCCL's EFA transport, and node group {group.name!r} "
                           f"({group.instance_type}) has no EFA; use it on an EFA group, or \"check\"", '"check"'))
    if e.max_nodes > group.max_size:
        nodes = f"{e.min_nodes}:{e.max_nodes}" if e.elastic else e.max_nodes
        out.append(problem(f"{key}.nodes", nodes, f"needs {e.max_nodes} nodes but node group {group.name!r} has "
                           f"max_size {group.max_size}", str(group.max_size)))
    return out


def _image_pairs(cfg: StackConfig):
    """(index, experiment, its node group, the table's row for its image or None) for every experiment on a group."""
    groups = cfg.node_groups
    for i, e in enumerate(cfg.experiments):
        group = groups.get(e.node_group)
        if group is not None:
            yield i, e, group, compat.find_image(e.image)


def image_problems(cfg: StackConfig) -> list[str]:
    """Each experiment's image can train on its node group: kernels for the group's GPUs, and a CUDA the
    AMI's driver runs without the forward-compatibility package (core/catalog/compat.py, with its sources)."""
    out = []
    for i, e, group, row in _image_pairs(cfg):
        if row is None:
            continue
        reasons = compat.pair_problems(row, group.instance_type, group.ami_type)
        if reasons:
            fit = compat.default_image(group.instance_type, group.ami_type, cfg.region or catalog.DEFAULT_REGION, e.framework)
            out.append(problem(f"{cfg.experiment_key(i)}.image", e.image,
                               f"cannot train on node group {group.name!r} ({group.instance_type}, {group.ami_type}): "
                               f"{'; '.join(reasons)}; leave image unset for the group's default (core/catalog/compat.py), "
                               f"or use one built for its GPUs", show(fit)))
    return out


def gpu_training_problems(cfg: StackConfig) -> list[str]:
    """Experiments whose framework cannot train on GPUs in its pinned release (``compat.NO_GPU_TRAINING``): every
    node group is a GPU group, so the cluster cannot run them."""
    out = []
    for i, e, group, _ in _image_pairs(cfg):
        why = compat.NO_GPU_TRAINING.get(e.framework)
        if why:
            out.append(problem(f"{cfg.experiment_key(i)}.framework", e.framework,
                               f"cannot train on node group {group.name!r} ({group.instance_type}): {why}; run it on "
                               f"this machine's CPUs with `eksbench run {cfg.stack} --local`, or benchmark the GPUs "
                               "with pytorch, horovod or tensorflow", '"pytorch"'))
    return out


def image_advisories(cfg: StackConfig, today: str | None = None) -> list[str]:
    """Warnings: an image eksbench has no CUDA build for (custom images, other frameworks) is not checked; a
    framework whose GPU path has not run yet (``compat.NOT_VERIFIED_ON_GPUS``) is not verified; an image past
    AWS's patch support on ``today`` (ISO date; None: no date check) is named with what to use instead.

    Each is said once for all the experiments it concerns, and names the setting that chose what it is about: the
    experiments' own ``image``/``framework`` keys where the stack file sets them, else the node group's
    ``instance_type``, from which ``core.config.shape`` picks an experiment's default image."""
    found: dict[tuple[tuple[str, ...], str], list[tuple[int, Experiment]]] = {}
    for i, e, group, row in _image_pairs(cfg):
        for setter, body in _image_notes(cfg, e, group, row, today):
            found.setdefault((setter, body), []).append((i, e))
    return [f"{_setter_text(cfg, setter, members)}: {body}" for (setter, body), members in found.items()]


def _image_notes(cfg: StackConfig, e: Experiment, group: GpuNodeGroup, row: Any,
                 today: str | None) -> list[tuple[tuple[str, ...], str]]:
    """(what set it, the advisory) for one experiment's image and framework on its node group."""
    out = []
    cc = compat.gpu_arch(group.instance_type)
    region = cfg.region or catalog.DEFAULT_REGION
    defaulted = e.image == compat.default_image(group.instance_type, group.ami_type, region, e.framework)
    image_setter = ("default image", group.name, e.image) if defaulted else ("image", e.image)
    if row is not None and today and compat.past_patch_support(row, today):
        instead = (compat.SM70_AFTER_SUPPORT if cc == "7.0" else
                   f"set image: to a supported {row.framework} image (core/catalog/compat.py IMAGES)")
        out.append((image_setter, f"{row.name} left AWS's patch support on {row.end_of_patch} (no security fixes "
                                  f"since); {instead}"))
    if row is None and cc is not None:
        driver = compat.AMI_DRIVERS.get(group.ami_type)
        on_driver = f" and runs on its NVIDIA driver {driver.branch} without the compat package" if driver else ""
        out.append((("image", e.image), "not in core/catalog/compat.py, so eksbench cannot check that its CUDA build "
                    f"has kernels for node group {group.name!r} ({catalog.INSTANCE_TYPES[group.instance_type].gpu_model}, "
                    f"{compat.sm(cc)}){on_driver}; check it, or add its row to core/catalog/compat.py IMAGES"))
    why = compat.NOT_VERIFIED_ON_GPUS.get(e.framework)
    if why and cc is not None:
        out.append((("framework", e.framework), f"not verified on GPUs: {why}; its numbers on node group "
                    f"{group.name!r} may fail or mislead until a GPU run has checked it"))
    return out


def _setter_text(cfg: StackConfig, setter: tuple[str, ...], members: list[tuple[int, Experiment]]) -> str:
    """Whom an advisory is about: ``experiments[0].image="..."`` (every experiment that sets it, each key once), or
    for a default image the node group's instance type that chose it and the experiments that get it."""
    kind, *rest = setter
    if kind == "default image":
        group, image = rest
        index = next(k for k, g in enumerate(cfg.gpu_node_groups) if g.name == group)
        names = ", ".join(dict.fromkeys(e.name for _, e in members))
        return (f"gpu_node_groups[{index}].instance_type={show(cfg.gpu_node_groups[index].instance_type)}: the "
                f"default image it gives {names} (no image: set), {show(image)}")
    keys = ", ".join(dict.fromkeys(f"{cfg.experiment_key(i)}.{kind}" for i, _ in members))
    return f"{keys}={show(rest[0])}"


# FSx links /datasets and /results to S3 through data repository associations, which exist on
# PERSISTENT_2 file systems only (AWS FSx for Lustre user guide, "Linking your file system to an S3
# bucket"; pulumi_aws/fsx/data_repository_association.py: "only compatible with ... PERSISTENT_2
# deployment type"); other types link through the file system's import/export paths, which export
# nothing automatically.
FSX_DRA_DEPLOYMENT_TYPES = ("PERSISTENT_2",)


def _fsx_deployment(cfg: StackConfig) -> list[str]:
    """An FSx file system the stack can link to S3 (see FSX_DRA_DEPLOYMENT_TYPES)."""
    f = cfg.storage.fsx
    if cfg.storage.kind != "fsx" or f.deployment_type in FSX_DRA_DEPLOYMENT_TYPES:
        return []
    return [problem("storage.fsx.deployment_type", f.deployment_type,
                    f"cannot have data repository associations, which link /datasets and /results to S3 "
                    f"(FSx for Lustre: PERSISTENT_2 only); allowed: {', '.join(FSX_DRA_DEPLOYMENT_TYPES)}",
                    show(FSX_DRA_DEPLOYMENT_TYPES[0]))]


def _parallel_gpus(cfg: StackConfig) -> list[str]:
    """With ``execution: parallel`` every experiment's Jobs start at once: the experiments on one node
    group must fit its GPUs at max_size, each at its largest (max_nodes x gpus_per_node).

    Otherwise the pods that land first keep the others Pending, and a Job's activeDeadlineSeconds
    counts from its start, Pending included (Kubernetes Job docs, "Job termination and cleanup"), so the
    starved experiment times out without training. An experiment's evaluation pod (one GPU) starts only
    after its own training ends and so never adds to it; paddle pservers request no GPU.
    """
    if cfg.execution != "parallel":
        return []
    out = []
    for g in cfg.gpu_node_groups:
        mine = [e for e in cfg.experiments if e.node_group == g.name]
        asked = sum(e.max_nodes * e.gpus_per_node for e in mine)
        have = g.max_size * g.gpus_per_node
        if len(mine) < 2 or asked <= have:
            continue
        each = ", ".join(f"{e.name} ({e.max_nodes} x {e.gpus_per_node})" for e in mine)
        out.append(problem("execution", cfg.execution,
                           f"experiments {each} run at once on node group {g.name!r} and ask {asked} GPUs, but it "
                           f"has {have} at max_size ({g.max_size} x {g.instance_type} with {g.gpus_per_node} each); "
                           f"set execution: sequential, or move an experiment to another node group (gpu_node_groups)",
                           '"sequential"'))
    return out
